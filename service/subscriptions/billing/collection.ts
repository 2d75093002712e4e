/**
 * Collecting invoices: charging them (first attempts and retries together: each chain's batch is one
 * `chargeMany` transaction), settling them paid, and recording a failed attempt on the dunning schedule
 * (or ending the subscription when no retry is left). Shared by the steps of a billing round.
 */
import { Effect, Result } from "effect";
import { ChargeBatches } from "../../charges/charge-batches.ts";
import { ChargeStore } from "../../charges/charge-store.ts";
import { Outbox } from "../../events/outbox.ts";
import { nextRetryAt } from "../dunning.ts";
import { InvoiceStore, type InvoiceToCharge } from "../invoice-store.ts";
import { SubscriptionStore } from "../subscription-store.ts";
import { Subscriptions } from "../subscriptions.ts";
import type { BillingRound } from "./round.ts";

/** Refusals no retry can cure: the customer revoked, or the invoice exceeds what they signed for. */
const FINAL_REFUSALS = new Set(["mandate_revoked", "mandate_cap_exceeded"]);

/**
 * Failures that neither the customer's top-up nor a signature cures, but that end when the token's
 * issuer clears the address (the customer's wallet, or the merchant's payout address, blacklisted):
 * retried on the dunning schedule like any failure, and when none is left the invoice alone is given
 * up. The subscription stays (past_due) and its next period is billed as usual.
 */
export const keepsSubscription = (code: string | null) =>
  code === "customer_blocked" || code === "payout_address_blocked";

/** Invoices paid (at chain time `paidAt`), their subscriptions current again, and their `invoice.paid`. */
export const markPaid = (paid: ReadonlyArray<{ invoice: string; subscription: string; paidAt: number }>) =>
  Effect.gen(function* () {
    if (paid.length === 0) return;
    const invoices = yield* InvoiceStore;
    const subscriptionStore = yield* SubscriptionStore;
    const subscriptions = yield* Subscriptions;
    const outbox = yield* Outbox;
    yield* invoices.markPaid(paid.map((p) => ({ invoice: p.invoice, paidAt: p.paidAt })));
    yield* subscriptionStore.markCurrent(paid.map((p) => p.subscription));
    const rows = yield* invoices.reloadMany(paid.map((p) => p.invoice));
    yield* outbox.raise(
      ...rows.map((invoice) => ({
        merchantId: invoice.merchant_id,
        livemode: invoice.livemode,
        type: "invoice.paid" as const,
        object: subscriptions.renderInvoice(invoice),
        key: `${invoice.id}:paid`,
      })),
    );
  });

/**
 * A failed attempt: retry on the dunning schedule, or end the subscription when none is left (for a
 * blocked address, only the invoice is given up).
 */
export const recordFailure = (round: BillingRound, invoiceId: string, code: string) =>
  Effect.gen(function* () {
    const invoices = yield* InvoiceStore;
    const subscriptionStore = yield* SubscriptionStore;
    const subscriptions = yield* Subscriptions;
    const outbox = yield* Outbox;
    // The token was paused under a charge in flight: not an attempt of the customer's. Tried again at
    // once, which the round leaves for after the token is unpaused.
    if (code === "token_paused") return yield* invoices.recordUncountedAttempt(invoiceId, round.now);
    const invoice = yield* invoices.reload(invoiceId);
    const firstFailedAt = invoice.first_failed_at ?? round.now;
    const retryAt = FINAL_REFUSALS.has(code)
      ? undefined
      : nextRetryAt({
          firstFailureAt: firstFailedAt,
          failures: invoice.attempt_count,
          periodEnd: invoice.period_end,
        });
    yield* invoices.recordFailedAttempt(invoiceId, code, firstFailedAt, retryAt);
    const ends = retryAt === undefined && !keepsSubscription(code);
    if (!ends) yield* subscriptionStore.markPastDue(invoice.subscription_id);
    yield* outbox.raise({
      merchantId: invoice.merchant_id,
      livemode: invoice.livemode,
      type: "invoice.payment_failed",
      object: subscriptions.renderInvoice(yield* invoices.reload(invoiceId)),
      key: `${invoiceId}:failed:${invoice.attempt_count}`,
    });
    if (ends)
      yield* subscriptions.end(
        invoice.subscription_id,
        code === "mandate_revoked" ? "mandate_revoked" : "payment_failed",
      );
  });

/**
 * Another charge of the invoice's period (one the merchant made through the API) reached the chain for
 * less than the invoice's total. The escrow takes one charge per period, so the rest cannot be
 * collected in it: the invoice stays open with what was paid, is not retried, raises
 * `invoice.payment_failed` (failure_code `period_already_charged`) and moves the subscription to
 * `past_due`; its period's end makes it uncollectible without ending the subscription (lapse-unpaid.ts).
 */
export const recordChargedShort = (round: BillingRound, invoiceId: string, amountPaid: bigint) =>
  Effect.gen(function* () {
    const invoices = yield* InvoiceStore;
    const subscriptionStore = yield* SubscriptionStore;
    const subscriptions = yield* Subscriptions;
    const outbox = yield* Outbox;
    yield* invoices.recordChargedShort(invoiceId, amountPaid, round.now);
    const invoice = yield* invoices.reload(invoiceId);
    yield* subscriptionStore.markPastDue(invoice.subscription_id);
    yield* outbox.raise({
      merchantId: invoice.merchant_id,
      livemode: invoice.livemode,
      type: "invoice.payment_failed",
      object: subscriptions.renderInvoice(invoice),
      key: `${invoiceId}:charged_short`,
    });
  });

/** What charging a set of invoices came to, invoice by invoice. */
export interface Collection {
  /** The charge each was made with in this transaction; `pending` while it has no outcome. */
  readonly charged: ReadonlyArray<{
    readonly invoice: string;
    readonly charge: string;
    readonly pending: boolean;
  }>;
  /** Already charged for its period by another charge, which may be reaching its outcome meanwhile. */
  readonly taken: ReadonlyArray<{ readonly invoice: string; readonly charge: string }>;
  /** Failed attempts, to record on the dunning schedule. */
  readonly failed: ReadonlyArray<{ readonly id: string; readonly code: string }>;
}

/** Charges invoices together (each chain's batch is one transaction); writes nothing to the invoices. */
export const collect = (toCharge: ReadonlyArray<InvoiceToCharge>) =>
  Effect.gen(function* () {
    const batches = yield* ChargeBatches;
    const charges = yield* ChargeStore;
    const outcomes = yield* batches.send(
      toCharge.map((invoice) => ({
        scope: { merchantId: invoice.merchantId, livemode: invoice.livemode },
        mandateId: invoice.mandateId,
        amount: { units: invoice.total },
      })),
    );
    const recorded = new Map(
      (yield* charges.reloadMany(outcomes.flatMap((o) => (Result.isSuccess(o) ? [o.success] : [])))).map(
        (row) => [row.id, row] as const,
      ),
    );
    const charged: Array<Collection["charged"][number]> = [];
    const taken: Array<Collection["taken"][number]> = [];
    const failed: Array<Collection["failed"][number]> = [];
    for (const [i, invoice] of toCharge.entries()) {
      const outcome = outcomes[i];
      if (outcome === undefined) continue;
      if (Result.isSuccess(outcome)) {
        const charge = recorded.get(outcome.success);
        charged.push({ invoice: invoice.id, charge: outcome.success, pending: charge?.status === "pending" });
        if (charge?.status === "failed")
          failed.push({ id: invoice.id, code: charge.failure_code ?? "processing_error" });
        continue;
      }
      // Already charged for this period (a retry after an outcome was misread): settle with that charge.
      const takenBy =
        outcome.failure.code === "period_already_charged"
          ? yield* charges.periodCharge(invoice.mandateId, invoice.period)
          : undefined;
      if (takenBy !== undefined) taken.push({ invoice: invoice.id, charge: takenBy });
      else failed.push({ id: invoice.id, code: outcome.failure.code });
    }
    return { charged, taken, failed } satisfies Collection;
  });

/** Failed attempts recorded, each on the dunning schedule or ending its subscription. */
export const recordFailures = (round: BillingRound, failed: Collection["failed"]) =>
  Effect.forEach(failed, ({ id, code }) => recordFailure(round, id, code), { discard: true });

/** Charges open invoices again together, counting the attempt; links each to its charge, and records the failures. */
export const chargeInvoices = (round: BillingRound, toCharge: ReadonlyArray<InvoiceToCharge>) =>
  Effect.gen(function* () {
    if (toCharge.length === 0) return;
    const invoices = yield* InvoiceStore;
    yield* invoices.markAttempted(toCharge.map((invoice) => invoice.id));
    const { charged, taken, failed } = yield* collect(toCharge);
    yield* invoices.linkCharges([...charged, ...taken]);
    yield* recordFailures(round, failed);
  });
