/**
 * The billing worker: invoices each subscription at each period boundary of its mandate (chain time,
 * so the test clock moves it), charges the invoice, and follows the charge to `invoice.paid` or into
 * dunning. Every step handles its rows in batches, each in one transaction under row locks taken in id
 * order with SKIP LOCKED, and an invoice is unique per subscription and period, so several processes
 * billing at once, or a restart mid-pass, never invoice a period twice.
 */
import { PgClient } from "@effect/sql-pg";
import { Array as Arr, Clock, Effect, Option, Result } from "effect";
import { SqlClient } from "effect/sql";
import { periodIndexAt, periodStart } from "../../src/ledger/period.ts";
import type { Caller } from "../auth/api-keys.ts";
import { ChainClients } from "../chains/chain-clients.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Charges } from "../charges/charges.ts";
import { EVENTS_CHANNEL, insertEvents, raiseEvent } from "../events/outbox.ts";
import { newId } from "../ids.ts";
import { tokenOf } from "../mandates/mandate-object.ts";
import { Mandates } from "../mandates/mandates.ts";
import { formatDecimal } from "../money/decimal.ts";
import type { Worker } from "../workers/workers.ts";
import { nextRetryAt } from "./dunning.ts";
import { type DiscountWindow, draftInvoice } from "./invoice-draft.ts";
import type { InvoiceTotals } from "./invoice-math.ts";
import { type PriceRow, Prices } from "./prices.ts";
import type { SubscriptionRow } from "./subscription-object.ts";
import { Subscriptions } from "./subscriptions.ts";
import { draftUpcomingCharge, readOutlook } from "./upcoming-charge.ts";
import { atRiskCheckAt, atRiskReasons, discountWarningAt } from "./warnings.ts";

/** Items per transaction (and charges per chargeMany), and transactions at once. */
const CHUNK = 200;
const PARALLEL = 4;
/** Rows one step takes per round. */
const BATCH = CHUNK * PARALLEL;
const MAX_ROUNDS = 10;

/** Refusals no retry can cure: the customer revoked, or the invoice exceeds what they signed for. */
const FINAL_REFUSALS = new Set(["mandate_revoked", "mandate_cap_exceeded"]);

/** An open invoice with what charging it needs. */
interface InvoiceToCharge {
  readonly id: string;
  readonly merchant_id: string;
  readonly livemode: boolean;
  readonly total: string;
  readonly token_address: string;
  readonly mandate_id: string;
}

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
    // A boundary can make thousands due at once: keep going while steps come back full.
    for (let round = 0; round < MAX_ROUNDS; round++) if (!(yield* billChain(chain, now.value))) break;
  }
});

/** One chain's billing at chain time `now`; true when a step had more work than one batch. */
export const billChain = (chain: ResolvedChain, now: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const pg = yield* PgClient.PgClient;
    const subscriptions = yield* Subscriptions;
    const prices = yield* Prices;
    const charges = yield* Charges;
    const mandates = yield* Mandates;
    const withPg = notify(pg);
    const priceRows = new Map<string, PriceRow>();
    const priceOf = (id: string) =>
      priceRows.has(id)
        ? Effect.succeed(priceRows.get(id) as PriceRow)
        : Effect.tap(prices.byId(id), (row) => Effect.sync(() => priceRows.set(id, row)));

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

    /** Invoices paid (at chain time `paidAt`): one statement each for the batch, and their invoice.paid. */
    const markPaid = (paid: readonly { invoice: string; subscription: string; paidAt: number }[]) =>
      Effect.gen(function* () {
        if (paid.length === 0) return;
        yield* sql`UPDATE billing.invoices i SET status = 'paid', paid_at = v.paid_at, next_attempt_at = NULL,
            updated_at = now()
          FROM unnest(${paid.map((p) => p.invoice)}::text[], ${paid.map((p) => p.paidAt)}::bigint[]) AS v(id, paid_at)
          WHERE i.id = ANY (${paid.map((p) => p.invoice)}::text[]) AND i.id = v.id`;
        yield* sql`UPDATE billing.subscriptions SET status = 'active', updated_at = now()
          WHERE id IN ${sql.in(paid.map((p) => p.subscription))} AND status = 'past_due'`;
        const invoices = yield* subscriptions.reloadInvoices(paid.map((p) => p.invoice));
        const created = Math.floor((yield* Clock.currentTimeMillis) / 1000);
        const events = yield* Effect.forEach(invoices, (invoice) =>
          Effect.map(newId("event"), (id) => ({
            id,
            created,
            merchantId: invoice.merchant_id,
            livemode: invoice.livemode,
            type: "invoice.paid",
            object: subscriptions.renderInvoice(invoice),
            key: `${invoice.id}:paid`,
          })),
        );
        yield* insertEvents(events).pipe(withPg);
      });

    /** A failed attempt: retry on the dunning schedule, or end the subscription when none is left. */
    const recordFailure = (invoiceId: string, code: string) =>
      Effect.gen(function* () {
        const invoice = yield* subscriptions.reloadInvoice(invoiceId);
        const firstFailedAt = invoice.first_failed_at ?? now;
        const retryAt = FINAL_REFUSALS.has(code)
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

    /** The charge of the invoice's period that did not fail, whichever row recorded it. */
    const chargeTaking = (mandateId: string, invoiceId: string) =>
      sql<{ id: string }>`SELECT c.id FROM billing.charges c JOIN billing.invoices i ON i.id = ${invoiceId}
        WHERE c.mandate_id = ${mandateId} AND c.period = i.period AND c.status <> 'failed'
        ORDER BY c.created_at LIMIT 1`.pipe(Effect.map((rows) => rows[0]?.id));

    /**
     * Charges open invoices (first attempts and retries) together: the escrow takes each chain's batch in
     * one `chargeMany` transaction.
     */
    const chargeInvoices = (invoices: readonly InvoiceToCharge[]) =>
      Effect.gen(function* () {
        if (invoices.length === 0) return;
        const decimals = (token: string) => tokenOf(chain, token)?.decimals ?? 0;
        const requests = invoices.map((invoice) => ({
          caller: billingCaller(invoice),
          mandateId: invoice.mandate_id,
          input: { amount_decimal: formatDecimal(BigInt(invoice.total), decimals(invoice.token_address)) },
        }));
        const ids = invoices.map((invoice) => invoice.id);
        yield* sql`UPDATE billing.invoices SET attempt_count = attempt_count + 1, next_attempt_at = NULL,
            updated_at = now() WHERE id IN ${sql.in(ids)}`;
        const results = yield* charges.createMany(requests);
        const linked: { id: string; charge: string }[] = [];
        const failed: { id: string; code: string }[] = [];
        for (const [i, invoice] of invoices.entries()) {
          const result = results[i];
          if (result === undefined) continue;
          if (Result.isSuccess(result)) {
            linked.push({ id: invoice.id, charge: result.success.id });
            if (result.success.status === "failed")
              failed.push({ id: invoice.id, code: result.success.failure_code ?? "processing_error" });
            continue;
          }
          const taken =
            result.failure.code === "period_already_charged"
              ? yield* chargeTaking(invoice.mandate_id, invoice.id)
              : undefined;
          // Already charged for this period (a retry after an outcome was misread): settle with it.
          if (taken !== undefined) linked.push({ id: invoice.id, charge: taken });
          else failed.push({ id: invoice.id, code: result.failure.code });
        }
        if (linked.length > 0)
          yield* sql`UPDATE billing.invoices i SET charge_id = v.charge, updated_at = now()
            FROM unnest(${linked.map((l) => l.id)}::text[], ${linked.map((l) => l.charge)}::text[]) AS v(id, charge)
            WHERE i.id = ANY (${linked.map((l) => l.id)}::text[]) AND i.id = v.id`;
        yield* Effect.forEach(failed, ({ id, code }) => recordFailure(id, code), { discard: true });
      });

    /** Open invoices with what charging them needs (one query for a batch). */
    const invoicesToCharge = (ids: readonly string[]) =>
      ids.length === 0
        ? Effect.succeed([] as readonly InvoiceToCharge[])
        : sql<InvoiceToCharge>`SELECT i.id, i.merchant_id, i.livemode, i.total::text AS total, p.token_address,
              s.mandate_id FROM billing.invoices i JOIN billing.subscriptions s ON s.id = i.subscription_id
              JOIN billing.prices p ON p.id = s.price_id WHERE i.id IN ${sql.in(ids)}`;

    /** Invoices each (locked) subscription for the period the chain is in; returns the invoices to charge. */
    const billPeriods = (rows: readonly SubscriptionRow[]) =>
      Effect.gen(function* () {
        const drafts: {
          readonly row: SubscriptionRow;
          readonly id: string;
          readonly period: number;
          readonly totals: InvoiceTotals;
          readonly window: DiscountWindow;
        }[] = [];
        for (const row of rows) {
          if (row.mandate_status === "revoked") {
            yield* subscriptions.endSubscription(row.id, "mandate_revoked");
            continue;
          }
          const period = periodIndexAt(row.anchor, now) ?? 0;
          if (row.cancel_at_period_end && row.current_period !== null && period > row.current_period) {
            yield* subscriptions.endSubscription(row.id, "requested");
            continue;
          }
          const price = yield* priceOf(row.price_id);
          const { totals, window } = yield* draftInvoice({ chain, subscription: row, price, period });
          drafts.push({ row, id: yield* newId("invoice"), period, totals, window });
        }
        if (!Arr.isReadonlyArrayNonEmpty(drafts)) return [];
        const inserted = yield* sql<{ id: string }>`INSERT INTO billing.invoices ${sql.insert(
          Arr.map(drafts, ({ row, id, period, totals }) => ({
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
          })),
        )} ON CONFLICT (subscription_id, period) DO NOTHING RETURNING id`;
        const fresh = new Set(inserted.map((r) => r.id));
        const advanced = drafts.map(({ row, id, period, window }) => {
          const nextStart = periodStart(row.anchor, period + 1);
          return {
            id: row.id,
            period,
            next_billing_at: nextStart,
            invoice: fresh.has(id) ? id : null,
            discount_start: window.start,
            discount_end: window.end,
            at_risk_check_at: atRiskCheckAt(nextStart),
            discount_warning_at:
              window.end === period + 1 ? discountWarningAt(nextStart) : row.discount_warning_at,
          };
        });
        yield* sql`UPDATE billing.subscriptions s SET current_period = v.period, next_billing_at = v.next_billing_at,
            latest_invoice = COALESCE(v.invoice, s.latest_invoice), discount_start_period = v.discount_start,
            discount_end_period = v.discount_end, at_risk_check_at = v.at_risk_check_at,
            discount_warning_at = v.discount_warning_at, updated_at = now()
          FROM jsonb_to_recordset(${JSON.stringify(advanced)}::jsonb) AS v(id text, period int, next_billing_at bigint,
            invoice text, discount_start int, discount_end int, at_risk_check_at bigint, discount_warning_at bigint)
          WHERE s.id = ANY (${advanced.map((a) => a.id)}::text[]) AND s.id = v.id`;
        const billed = drafts.filter((d) => fresh.has(d.id));
        yield* markPaid(
          billed
            .filter((d) => d.totals.total === 0n)
            .map((d) => ({ invoice: d.id, subscription: d.row.id, paidAt: now })),
        );
        return billed
          .filter((d) => d.totals.total > 0n)
          .map(
            ({ row, id, totals }): InvoiceToCharge => ({
              id,
              merchant_id: row.merchant_id,
              livemode: row.livemode,
              total: totals.total.toString(),
              token_address: row.token_address,
              mandate_id: row.mandate_id,
            }),
          );
      });

    /** The invoices among `ids` still matching `condition` ($2 on, from `params`), locked in id order. */
    const lockInvoices = (ids: readonly string[], condition: string, params: readonly unknown[] = []) =>
      ids.length === 0
        ? Effect.succeed([] as string[])
        : sql
            .unsafe<{ id: string }>(
              `SELECT id FROM billing.invoices WHERE id = ANY($1) AND ${condition}
               ORDER BY id FOR UPDATE SKIP LOCKED`,
              [ids, ...params],
            )
            .pipe(Effect.map((rows) => rows.map((row) => row.id)));
    const lockedSubscription = (id: string, condition: string, params: readonly unknown[] = []) =>
      Effect.map(subscriptions.lockWhere([id], condition, params), (rows) => rows[0]);
    const lockedInvoice = (id: string, condition: string, params: readonly unknown[] = []) =>
      Effect.gen(function* () {
        return (yield* lockInvoices([id], condition, params)).length > 0
          ? yield* subscriptions.reloadInvoice(id)
          : undefined;
      });
    /**
     * Batches of CHUNK items, PARALLEL at a time, each in one transaction (one commit, one chargeMany);
     * if a batch fails, each of its items in its own transaction, so one bad row or a chain outage never
     * holds back the rest.
     */
    const inTransactions = <E, R>(
      ids: readonly string[],
      batch: (ids: readonly string[]) => Effect.Effect<void, E, R>,
    ) => {
      const one = (group: readonly string[]) => sql.withTransaction(batch(group));
      const itemByItem = (group: readonly string[]) =>
        Effect.forEach(
          group,
          (id) =>
            one([id]).pipe(
              Effect.catchCause((cause) =>
                Effect.logWarning("billing step failed; retried on the next pass", cause).pipe(
                  Effect.annotateLogs({ id }),
                ),
              ),
            ),
          { discard: true },
        );
      return Effect.forEach(
        Arr.chunksOf(ids, CHUNK),
        (group) => one(group).pipe(Effect.catchCause(() => itemByItem(group))),
        { concurrency: PARALLEL, discard: true },
      );
    };
    const eachInTransaction = <A, E, R>(
      ids: readonly string[],
      step: (id: string) => Effect.Effect<A, E, R>,
    ) => inTransactions(ids, (group) => Effect.forEach(group, step, { discard: true }));

    // 1. Charges that reached an outcome: paid, or a failure the charge worker found after a revert.
    const settled = yield* sql<{
      id: string;
    }>`SELECT i.id FROM billing.invoices i JOIN billing.charges c ON c.id = i.charge_id
      WHERE i.status = 'open' AND c.chain_id = ${chain.id}
        AND (c.status IN ('succeeded', 'released', 'returned')
          OR (c.status = 'failed' AND (i.next_attempt_at IS NULL OR EXISTS (SELECT 1 FROM billing.charges o
                WHERE o.mandate_id = c.mandate_id AND o.period = i.period AND o.status <> 'failed'))))
      ORDER BY i.id LIMIT ${BATCH}`;
    yield* inTransactions(
      settled.map((r) => r.id),
      (ids) =>
        Effect.gen(function* () {
          const rows = yield* sql<{
            id: string;
            subscription_id: string;
            charge_id: string;
            mandate_id: string;
            charge_status: string;
            failure_code: string | null;
            charged_at: number | null;
            next_attempt_at: number | null;
          }>`SELECT i.id, i.subscription_id, c.id AS charge_id, c.mandate_id, c.status AS charge_status,
              c.failure_code, c.charged_at::float8 AS charged_at, i.next_attempt_at::float8 AS next_attempt_at
            FROM billing.invoices i JOIN billing.charges c ON c.id = i.charge_id
            WHERE i.id IN ${sql.in(ids)} AND i.status = 'open' FOR UPDATE OF i SKIP LOCKED`;
          const paid = rows.filter((r) => ["succeeded", "released", "returned"].includes(r.charge_status));
          yield* markPaid(
            paid.map((r) => ({
              invoice: r.id,
              subscription: r.subscription_id,
              paidAt: r.charged_at ?? now,
            })),
          );
          for (const row of rows.filter((r) => r.charge_status === "failed")) {
            const taken = yield* chargeTaking(row.mandate_id, row.id);
            if (taken !== undefined)
              yield* sql`UPDATE billing.invoices SET charge_id = ${taken}, updated_at = now() WHERE id = ${row.id}`;
            else if (row.next_attempt_at === null)
              yield* recordFailure(row.id, row.failure_code ?? "processing_error");
          }
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
          const row = yield* lockedSubscription(id, "s.status = 'incomplete'");
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

    // 4. Period boundaries: invoices written, then charged together.
    const due = yield* sql<{ id: string }>`SELECT id FROM billing.subscriptions
      WHERE chain_id = ${chain.id} AND status IN ('active', 'past_due') AND next_billing_at <= ${now}
      ORDER BY next_billing_at LIMIT ${BATCH}`;
    yield* inTransactions(
      due.map((r) => r.id),
      (ids) =>
        Effect.gen(function* () {
          const rows = yield* subscriptions.lockWhere(
            ids,
            "s.status IN ('active', 'past_due') AND s.next_billing_at <= $2",
            [now],
          );
          yield* chargeInvoices(yield* billPeriods(rows));
        }),
    );

    // 5. Dunning retries.
    const retries = yield* sql<{ id: string }>`SELECT i.id FROM billing.invoices i
      JOIN billing.subscriptions s ON s.id = i.subscription_id
      WHERE i.status = 'open' AND s.chain_id = ${chain.id} AND i.next_attempt_at <= ${now} LIMIT ${BATCH}`;
    yield* inTransactions(
      retries.map((r) => r.id),
      (ids) =>
        Effect.gen(function* () {
          const locked = yield* lockInvoices(ids, "status = 'open' AND next_attempt_at <= $2", [now]);
          yield* chargeInvoices(yield* invoicesToCharge(locked));
        }),
    );

    // 6. Advance warnings, each checked once per period (the column is cleared in the same transaction);
    //    none for a charge already due: billing it sets the next period's checks.
    /** Locks a subscription whose check `column` is due, clears it, and returns it when a warning may apply. */
    const dueForCheck = (id: string, column: "discount_warning_at" | "at_risk_check_at") =>
      Effect.gen(function* () {
        const row = yield* lockedSubscription(id, `s.${column} <= $2`, [now]);
        if (!row) return undefined;
        yield* sql.unsafe(`UPDATE billing.subscriptions SET ${column} = NULL WHERE id = $1`, [id]);
        const billing = row.status === "active" || row.status === "past_due";
        return billing && !row.cancel_at_period_end ? row : undefined;
      });
    const discountEnding = yield* sql<{ id: string }>`SELECT id FROM billing.subscriptions
      WHERE chain_id = ${chain.id} AND discount_warning_at <= ${now} AND next_billing_at > ${now} LIMIT ${BATCH}`;
    yield* eachInTransaction(
      discountEnding.map((r) => r.id),
      (id) =>
        Effect.gen(function* () {
          const row = yield* dueForCheck(id, "discount_warning_at");
          if (!row || row.discount_end_period === null) return;
          const upcoming = yield* draftUpcomingCharge({
            chain,
            subscription: row,
            rendered: subscriptions.render(row),
            price: yield* priceOf(row.price_id),
            period: row.discount_end_period,
          });
          if (upcoming.amount <= BigInt(row.cap)) return;
          yield* raiseEvent({
            merchantId: row.merchant_id,
            livemode: row.livemode,
            type: "discount.ending_above_cap",
            object: {
              ...upcoming.object,
              reason: "mandate_cap_exceeded",
              discount_ends_at: upcoming.object.charge_at,
            },
            key: `${id}:discount_ending_above_cap:${row.discount_end_period}`,
          }).pipe(withPg);
        }),
    );

    const atRisk = yield* sql<{ id: string }>`SELECT id FROM billing.subscriptions
      WHERE chain_id = ${chain.id} AND at_risk_check_at <= ${now} AND next_billing_at > ${now} LIMIT ${BATCH}`;
    yield* eachInTransaction(
      atRisk.map((r) => r.id),
      (id) =>
        Effect.gen(function* () {
          const row = yield* dueForCheck(id, "at_risk_check_at");
          if (!row || row.current_period === null) return;
          const period = row.current_period + 1;
          const upcoming = yield* draftUpcomingCharge({
            chain,
            subscription: row,
            rendered: subscriptions.render(row),
            price: yield* priceOf(row.price_id),
            period,
          });
          const outlook = yield* readOutlook(chain, yield* mandates.reload(row.mandate_id), upcoming.amount);
          const reasons = atRiskReasons(outlook);
          if (reasons.length === 0) return;
          const decimal = (units: bigint) => formatDecimal(units, upcoming.decimals);
          yield* Effect.forEach(reasons, (reason) =>
            raiseEvent({
              merchantId: row.merchant_id,
              livemode: row.livemode,
              type: "schedule.upcoming_charge_at_risk",
              object: {
                ...upcoming.object,
                reason,
                approval_left_decimal: decimal(outlook.approvalLeft),
                balance_decimal: decimal(outlook.balance),
                allowance_decimal: decimal(outlook.allowance),
              },
              key: `${id}:upcoming_charge_at_risk:${period}:${reason}`,
            }).pipe(withPg),
          );
        }),
    );
    return [settled, authorised, lapsed, due, retries, discountEnding, atRisk].some(
      (rows) => rows.length === BATCH,
    );
  });

export const subscriptionBilling: Worker<
  | SqlClient.SqlClient
  | PgClient.PgClient
  | ChainRegistry
  | ChainClients
  | Subscriptions
  | Prices
  | Charges
  | Mandates
> = {
  name: "subscription-billing",
  pass: billingPass,
  interval: "1 second",
  // Chain facts (a charge succeeding) arrive as events; settle their invoices at once.
  wakeOn: EVENTS_CHANNEL,
};
