/**
 * The billing worker: invoices each subscription at each period boundary of its mandate (chain time,
 * so the test clock moves it), charges the invoice, and follows the charge to `invoice.paid` or into
 * dunning. Every step handles one subscription or invoice in its own transaction under a row lock taken
 * with SKIP LOCKED, and an invoice is unique per subscription and period, so several processes billing
 * at once, or a restart mid-pass, never invoice a period twice.
 */
import { PgClient } from "@effect/sql-pg";
import { Effect, Option } from "effect";
import { SqlClient } from "effect/sql";
import { periodIndexAt, periodStart } from "../../src/ledger/period.ts";
import type { Caller } from "../auth/api-keys.ts";
import { ChainClients } from "../chains/chain-clients.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Charges } from "../charges/charges.ts";
import { EVENTS_CHANNEL, raiseEvent } from "../events/outbox.ts";
import { newId } from "../ids.ts";
import { tokenOf } from "../mandates/mandate-object.ts";
import { formatDecimal } from "../money/decimal.ts";
import type { Worker } from "../workers/workers.ts";
import { nextRetryAt } from "./dunning.ts";
import { draftInvoice } from "./invoice-draft.ts";
import { Prices } from "./prices.ts";
import type { SubscriptionRow } from "./subscription-object.ts";
import { Subscriptions } from "./subscriptions.ts";

const BATCH = 200;

const billingCaller = (row: { merchant_id: string; livemode: boolean }): Caller => ({
  merchantId: row.merchant_id,
  apiKeyId: "billing",
  livemode: row.livemode,
});

const notify =
  (pg: PgClient.PgClient) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.provideService(effect, PgClient.PgClient, pg);

export const billingPass = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const clients = yield* ChainClients;
  for (const chain of registry.all) {
    const now = yield* clients.latestTime(chain).pipe(Effect.option);
    if (Option.isNone(now)) continue;
    yield* billChain(chain, now.value);
  }
});

/** One chain's billing at chain time `now`. */
export const billChain = (chain: ResolvedChain, now: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const pg = yield* PgClient.PgClient;
    const subscriptions = yield* Subscriptions;
    const prices = yield* Prices;
    const charges = yield* Charges;
    const withPg = notify(pg);

    const invoiceEvent = (invoiceId: string, type: "invoice.paid" | "invoice.payment_failed", key: string) =>
      Effect.gen(function* () {
        const invoice = yield* subscriptions.reloadInvoice(invoiceId);
        yield* raiseEvent({
          merchantId: invoice.merchant_id,
          livemode: invoice.livemode,
          type,
          object: subscriptions.renderInvoice(invoice),
          key,
        }).pipe(withPg);
      });

    const markPaid = (invoiceId: string, subscriptionId: string, paidAt: number) =>
      Effect.gen(function* () {
        yield* sql`UPDATE billing.invoices SET status = 'paid', paid_at = ${paidAt}, next_attempt_at = NULL,
            updated_at = now() WHERE id = ${invoiceId}`;
        yield* sql`UPDATE billing.subscriptions SET status = 'active', updated_at = now()
          WHERE id = ${subscriptionId} AND status = 'past_due'`;
        yield* invoiceEvent(invoiceId, "invoice.paid", `${invoiceId}:paid`);
      });

    /** A failed attempt: retry on the dunning schedule, or end the subscription when none is left. */
    const recordFailure = (invoiceId: string, code: string) =>
      Effect.gen(function* () {
        const invoice = yield* subscriptions.reloadInvoice(invoiceId);
        const firstFailedAt = invoice.first_failed_at ?? now;
        const retryAt =
          code === "mandate_revoked"
            ? undefined
            : nextRetryAt({
                firstFailureAt: firstFailedAt,
                failures: invoice.attempt_count,
                periodEnd: invoice.period_end,
              });
        yield* sql`UPDATE billing.invoices SET first_failed_at = ${firstFailedAt}, next_attempt_at = ${retryAt ?? null},
            status = ${retryAt === undefined ? "uncollectible" : "open"}, updated_at = now() WHERE id = ${invoiceId}`;
        if (retryAt !== undefined)
          yield* sql`UPDATE billing.subscriptions SET status = 'past_due', updated_at = now()
            WHERE id = ${invoice.subscription_id} AND status = 'active'`;
        yield* invoiceEvent(
          invoiceId,
          "invoice.payment_failed",
          `${invoiceId}:failed:${invoice.attempt_count}`,
        );
        if (retryAt === undefined)
          yield* subscriptions.endSubscription(
            invoice.subscription_id,
            code === "mandate_revoked" ? "mandate_revoked" : "payment_failed",
          );
      });

    /** Charges an open invoice once more (or for the first time). */
    const attemptCharge = (invoiceId: string) =>
      Effect.gen(function* () {
        const invoice = yield* subscriptions.reloadInvoice(invoiceId);
        const subscription = yield* subscriptions.reload(invoice.subscription_id);
        const decimals = tokenOf(chain, invoice.token_address)?.decimals ?? 0;
        yield* sql`UPDATE billing.invoices SET attempt_count = attempt_count + 1, next_attempt_at = NULL,
            updated_at = now() WHERE id = ${invoiceId}`;
        const outcome = yield* charges
          .create(billingCaller(invoice), subscription.mandate_id, {
            amount_decimal: formatDecimal(BigInt(invoice.total), decimals),
          })
          .pipe(
            Effect.map((charge) => ({ charge })),
            Effect.catchTags({
              InvalidRequest: (refused) => Effect.succeed({ refused }),
              NotFound: (missing) => Effect.die(missing),
            }),
          );
        if ("refused" in outcome) return yield* recordFailure(invoiceId, outcome.refused.code);
        yield* sql`UPDATE billing.invoices SET charge_id = ${outcome.charge.id}, updated_at = now() WHERE id = ${invoiceId}`;
        if (outcome.charge.status === "failed")
          yield* recordFailure(invoiceId, outcome.charge.failure_code ?? "processing_error");
      });

    /** Invoices the period the chain is in and charges it. */
    const billPeriod = (row: SubscriptionRow) =>
      Effect.gen(function* () {
        if (row.mandate_status === "revoked")
          return yield* subscriptions.endSubscription(row.id, "mandate_revoked");
        const period = periodIndexAt(row.anchor, now) ?? 0;
        if (row.cancel_at_period_end && row.current_period !== null && period > row.current_period)
          return yield* subscriptions.endSubscription(row.id, "requested");
        const price = yield* prices.byId(row.price_id);
        const { totals, window } = yield* draftInvoice({ chain, subscription: row, price, period });
        const id = yield* newId("invoice");
        const inserted = yield* sql<{ id: string }>`INSERT INTO billing.invoices ${sql.insert({
          id,
          merchant_id: row.merchant_id,
          livemode: row.livemode,
          subscription_id: row.id,
          period,
          period_start: periodStart(row.anchor, period),
          period_end: periodStart(row.anchor, period + 1),
          status: "open",
          lines: pg.json(totals.lines),
          subtotal: totals.subtotal.toString(),
          discount: totals.discount.toString(),
          total: totals.total.toString(),
        })} ON CONFLICT (subscription_id, period) DO NOTHING RETURNING id`;
        yield* sql`UPDATE billing.subscriptions SET current_period = ${period},
            next_billing_at = ${periodStart(row.anchor, period + 1)},
            latest_invoice = COALESCE(${inserted[0]?.id ?? null}, latest_invoice),
            discount_start_period = ${window.start}, discount_end_period = ${window.end}, updated_at = now()
          WHERE id = ${row.id}`;
        if (inserted.length === 0) return;
        if (totals.total === 0n) return yield* markPaid(id, row.id, now);
        yield* attemptCharge(id);
      });

    /**
     * Locks a row still matching `condition` (placeholders from $2, filled by `params`), skipping one
     * another process holds: true when this transaction now holds it.
     */
    const lockRow = (
      table: "subscriptions" | "invoices",
      id: string,
      condition: string,
      params: unknown[] = [],
    ) =>
      sql
        .unsafe<{ id: string }>(
          `SELECT id FROM billing.${table} WHERE id = $1 AND ${condition} FOR UPDATE SKIP LOCKED`,
          [id, ...params],
        )
        .pipe(Effect.map((rows) => rows.length > 0));
    const lockedSubscription = (id: string, condition: string, params: unknown[] = []) =>
      Effect.gen(function* () {
        return (yield* lockRow("subscriptions", id, condition, params))
          ? yield* subscriptions.reload(id)
          : undefined;
      });
    const lockedInvoice = (id: string, condition: string, params: unknown[] = []) =>
      Effect.gen(function* () {
        return (yield* lockRow("invoices", id, condition, params))
          ? yield* subscriptions.reloadInvoice(id)
          : undefined;
      });
    /** Each item in its own transaction: one chain outage or bad row never holds back the rest. */
    const eachInTransaction = <A, E, R>(
      ids: readonly string[],
      step: (id: string) => Effect.Effect<A, E, R>,
    ) =>
      Effect.forEach(
        ids,
        (id) =>
          sql
            .withTransaction(step(id))
            .pipe(
              Effect.catchCause((cause) =>
                Effect.logWarning("billing step failed; retried on the next pass", cause).pipe(
                  Effect.annotateLogs({ id }),
                ),
              ),
            ),
        { discard: true },
      );

    // 1. Charges that reached an outcome: paid, or a failure the charge worker found after a revert.
    const settled = yield* sql<{
      id: string;
    }>`SELECT i.id FROM billing.invoices i JOIN billing.charges c ON c.id = i.charge_id
      WHERE i.status = 'open' AND c.chain_id = ${chain.id}
        AND (c.status IN ('succeeded', 'released', 'returned') OR (c.status = 'failed' AND i.next_attempt_at IS NULL))
      ORDER BY i.id LIMIT ${BATCH}`;
    yield* eachInTransaction(
      settled.map((r) => r.id),
      (id) =>
        Effect.gen(function* () {
          const invoice = yield* lockedInvoice(id, "status = 'open'");
          if (!invoice || invoice.charge_id === null) return;
          const charge = yield* charges.reload(invoice.charge_id);
          if (charge.status === "failed") {
            if (invoice.next_attempt_at === null)
              yield* recordFailure(id, charge.failure_code ?? "processing_error");
          } else if (charge.status !== "pending")
            yield* markPaid(id, invoice.subscription_id, charge.charged_at ?? now);
        }),
    );

    // 2. Subscriptions whose customer has authorised: active, and their current period is due at once.
    const authorised = yield* sql<{ id: string }>`SELECT s.id FROM billing.subscriptions s
      JOIN billing.mandates m ON m.id = s.mandate_id
      WHERE s.status = 'incomplete' AND s.chain_id = ${chain.id} AND m.status <> 'pending' LIMIT ${BATCH}`;
    yield* eachInTransaction(
      authorised.map((r) => r.id),
      (id) =>
        Effect.gen(function* () {
          const row = yield* lockedSubscription(id, "status = 'incomplete'");
          if (!row) return;
          if (row.mandate_status === "revoked")
            return yield* subscriptions.endSubscription(id, "mandate_revoked");
          yield* sql`UPDATE billing.subscriptions SET status = 'active', next_billing_at = ${now}, updated_at = now()
            WHERE id = ${id}`;
        }),
    );

    // 3. Invoices whose period ended unpaid can no longer be collected (the escrow charges the current
    //    period only).
    const lapsed = yield* sql<{ id: string }>`SELECT i.id FROM billing.invoices i
      JOIN billing.subscriptions s ON s.id = i.subscription_id
      WHERE i.status = 'open' AND s.chain_id = ${chain.id} AND i.period_end <= ${now} LIMIT ${BATCH}`;
    yield* eachInTransaction(
      lapsed.map((r) => r.id),
      (id) =>
        Effect.gen(function* () {
          const invoice = yield* lockedInvoice(id, "status = 'open' AND period_end <= $2", [now]);
          if (!invoice) return;
          if (invoice.charge_id !== null && (yield* charges.reload(invoice.charge_id)).status === "pending")
            return;
          yield* sql`UPDATE billing.invoices SET status = 'uncollectible', next_attempt_at = NULL, updated_at = now()
            WHERE id = ${id}`;
          yield* subscriptions.endSubscription(invoice.subscription_id, "payment_failed");
        }),
    );

    // 4. Period boundaries.
    const due = yield* sql<{ id: string }>`SELECT id FROM billing.subscriptions
      WHERE chain_id = ${chain.id} AND status IN ('active', 'past_due') AND next_billing_at <= ${now}
      ORDER BY next_billing_at LIMIT ${BATCH}`;
    yield* eachInTransaction(
      due.map((r) => r.id),
      (id) =>
        Effect.gen(function* () {
          const row = yield* lockedSubscription(
            id,
            "status IN ('active', 'past_due') AND next_billing_at <= $2",
            [now],
          );
          if (row) yield* billPeriod(row);
        }),
    );

    // 5. Dunning retries.
    const retries = yield* sql<{ id: string }>`SELECT i.id FROM billing.invoices i
      JOIN billing.subscriptions s ON s.id = i.subscription_id
      WHERE i.status = 'open' AND s.chain_id = ${chain.id} AND i.next_attempt_at <= ${now} LIMIT ${BATCH}`;
    yield* eachInTransaction(
      retries.map((r) => r.id),
      (id) =>
        Effect.gen(function* () {
          const invoice = yield* lockedInvoice(id, "status = 'open' AND next_attempt_at <= $2", [now]);
          if (invoice) yield* attemptCharge(id);
        }),
    );
  });

export const subscriptionBilling: Worker<
  SqlClient.SqlClient | PgClient.PgClient | ChainRegistry | ChainClients | Subscriptions | Prices | Charges
> = {
  name: "subscription-billing",
  pass: billingPass,
  interval: "1 second",
  // Chain facts (a charge succeeding) arrive as events; settle their invoices at once.
  wakeOn: EVENTS_CHANNEL,
};
