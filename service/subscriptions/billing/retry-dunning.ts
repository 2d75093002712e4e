/** Step 6 of a billing round: invoices whose dunning retry is due are charged again, together. */
import { Effect } from "effect";
import { InvoiceStore } from "../invoice-store.ts";
import { chargeInvoices } from "./collection.ts";
import { BATCH, type BillingRound, inTransactions } from "./round.ts";

export const retryDunning = (round: BillingRound) =>
  Effect.gen(function* () {
    const invoices = yield* InvoiceStore;
    const ids = yield* invoices.retriesDue(round.chain.id, round.now, BATCH, round.pausedTokens);
    yield* inTransactions(ids, (group) =>
      Effect.gen(function* () {
        const locked = yield* invoices.lock(group, { kind: "retry_due", now: round.now });
        yield* chargeInvoices(round, yield* invoices.toCharge(locked.map((invoice) => invoice.id)));
      }),
    );
    return ids.length === BATCH;
  });
