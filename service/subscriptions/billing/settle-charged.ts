/**
 * Step 1 of a billing round: invoices whose charge reached an outcome. Paid when it succeeded for at
 * least the invoice's total; partly paid (collection.ts: `recordChargedShort`) when it was another charge
 * of the period, made for less; when it failed (the charge outcome worker found it reverted), settled
 * with another charge that took the period, or recorded as a failed attempt.
 */
import { Effect } from "effect";
import { ChargeStore } from "../../charges/charge-store.ts";
import { InvoiceStore } from "../invoice-store.ts";
import { markPaid, recordChargedShort, recordFailure } from "./collection.ts";
import { type BillingRound, DUE_PER_ROUND, inTransactions } from "./round.ts";

/** A returned charge paid nothing: settle-returned.ts takes its invoice. */
const PAID = new Set(["succeeded", "released"]);

export const settleCharged = (round: BillingRound) =>
  Effect.gen(function* () {
    const invoices = yield* InvoiceStore;
    const charges = yield* ChargeStore;
    // As many as the boundary step bills a round: with fewer, settling fell behind through a long
    // boundary (at 100,000 due, invoices paid up to 75 s after their charges succeeded).
    const ids = yield* invoices.settleable(round.chain.id, DUE_PER_ROUND);
    yield* inTransactions(ids, (group) =>
      Effect.gen(function* () {
        const rows = yield* invoices.lockSettling(group);
        const charged = rows.filter((r) => PAID.has(r.charge_status));
        yield* markPaid(
          charged
            .filter((r) => r.charge_amount >= r.total)
            .map((r) => ({
              invoice: r.id,
              subscription: r.subscription_id,
              paidAt: r.charged_at ?? round.now,
            })),
        );
        for (const row of charged.filter((r) => r.charge_amount < r.total))
          yield* recordChargedShort(round, row.id, row.charge_amount);
        for (const row of rows.filter((r) => r.charge_status === "failed")) {
          const taken = yield* charges.periodCharge(row.mandate_id, row.period);
          if (taken !== undefined) yield* invoices.linkCharges([{ invoice: row.id, charge: taken }]);
          else if (row.next_attempt_at === null)
            yield* recordFailure(round, row.id, row.failure_code ?? "processing_error");
        }
      }),
    );
    return ids.length === DUE_PER_ROUND;
  });
