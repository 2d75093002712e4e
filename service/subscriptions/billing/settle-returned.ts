/**
 * Step 1b of a billing round: invoices whose charge was returned to the customer during its hold. The
 * money never reached the merchant, so the period is unpaid: the invoice shows nothing paid and what went
 * back (`amount_returned`), raises `invoice.payment_failed` (failure_code `charge_returned`) and moves the
 * subscription to `past_due`. The escrow takes one charge per period, so there is no retry: the invoice
 * stays open until its period ends, then uncollectible, and the subscription stays to bill its next
 * period (lapse-unpaid.ts), as for a period another charge paid short. A paid invoice's later return is
 * the same: `invoice.paid` told the merchant the period was paid; this event tells it the money went back.
 */
import { Effect } from "effect";
import { Outbox } from "../../events/outbox.ts";
import { InvoiceStore } from "../invoice-store.ts";
import { SubscriptionStore } from "../subscription-store.ts";
import { Subscriptions } from "../subscriptions.ts";
import { BATCH, type BillingRound, inTransactions } from "./round.ts";

export const settleReturned = (round: BillingRound) =>
  Effect.gen(function* () {
    const invoices = yield* InvoiceStore;
    const store = yield* SubscriptionStore;
    const subscriptions = yield* Subscriptions;
    const outbox = yield* Outbox;
    const ids = yield* invoices.returnPending(round.chain.id, BATCH);
    yield* inTransactions(ids, (group) =>
      Effect.gen(function* () {
        for (const row of yield* invoices.lockReturned(group)) {
          const collectible = row.status === "open" || row.status === "paid";
          yield* invoices.recordReturned(
            row.id,
            row.charge_amount,
            row.returned_at ?? round.now,
            row.period_end <= round.now,
          );
          // Void (its subscription ended) or already uncollectible: the amounts alone change.
          if (!collectible) continue;
          yield* store.markPastDue(row.subscription_id);
          const invoice = yield* invoices.reload(row.id);
          yield* outbox.raise({
            merchantId: invoice.merchant_id,
            livemode: invoice.livemode,
            type: "invoice.payment_failed",
            object: subscriptions.renderInvoice(invoice),
            key: `${row.id}:returned`,
          });
        }
      }),
    );
    return ids.length === BATCH;
  });
