/**
 * Step 3 of a billing round: an invoice whose period ended unpaid can no longer be collected (the
 * escrow charges the current period only): uncollectible, and the subscription ends, unless its charge
 * failed because the token's issuer blacklisted an address, or the period was paid in part by another
 * charge, or its charge was returned (collection.ts, settle-returned.ts: in these the subscription stays
 * and its next period is billed), or its
 * subscription's collection is paused. One whose charge is still pending waits for its outcome.
 */
import { Effect } from "effect";
import { ChargeStore } from "../../charges/charge-store.ts";
import { InvoiceStore } from "../invoice-store.ts";
import { SubscriptionStore } from "../subscription-store.ts";
import { Subscriptions } from "../subscriptions.ts";
import { keepsSubscription } from "./collection.ts";
import { BATCH, type BillingRound, eachInTransaction } from "./round.ts";

export const lapseUnpaid = (round: BillingRound) =>
  Effect.gen(function* () {
    const invoices = yield* InvoiceStore;
    const charges = yield* ChargeStore;
    const subscriptions = yield* Subscriptions;
    const store = yield* SubscriptionStore;
    const ids = yield* invoices.lapsed(round.chain.id, round.now, BATCH, round.pausedTokens);
    yield* eachInTransaction(ids, (id) =>
      Effect.gen(function* () {
        const [invoice] = yield* invoices.lock([id], { kind: "lapsed", now: round.now });
        if (!invoice) return;
        const charge = invoice.charge_id === null ? undefined : yield* charges.reload(invoice.charge_id);
        if (charge?.status === "pending") return;
        yield* invoices.markUncollectible(id);
        if (charge?.status === "failed" && keepsSubscription(charge.failure_code)) return;
        if (BigInt(invoice.amount_paid) > 0n || invoice.failure_code === "charge_returned") return;
        // Collection paused: dunning does not run, and an invoice left unpaid ends nothing.
        if ((yield* store.reload(invoice.subscription_id)).pause_behavior !== null) return;
        yield* subscriptions.end(invoice.subscription_id, "payment_failed");
      }),
    );
    return ids.length === BATCH;
  });
