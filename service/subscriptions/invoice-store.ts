/**
 * The one writer of `billing.invoices`, and so the one place an invoice changes state:
 *
 * | from | to            | when                                                                   |
 * |------|---------------|------------------------------------------------------------------------|
 * | —    | open          | billing writes the period's invoice (one per subscription and period)  |
 * | —    | paid          | written paid at once when its total is 0                                |
 * | —    | void / uncollectible | written so, uncharged, while its subscription's collection is paused |
 * | open | paid          | its charge succeeded on chain (`markPaid`)                              |
 * | open | open          | an attempt failed and a retry is scheduled (`recordFailedAttempt`)      |
 * | open | open          | an attempt the token's pause undid, not counted (`recordUncountedAttempt`) |
 * | open | open          | another charge of its period paid less than its total (`recordChargedShort`): partly paid, no retry |
 * | open | uncollectible | no retry left, a final refusal, or its period ended unpaid              |
 * | open | void          | its subscription ended (`voidOpenOf`)                                   |
 * | paid, open | open, or uncollectible once its period ended | its charge was returned (`recordReturned`): nothing paid, what went back in `amount_returned`, no retry |
 *
 * Two columns are also written elsewhere, by triggers on `billing.charges`: `charge_pending`, cleared
 * when the linked charge's outcome is recorded (migration 0021), so the settle step reads only invoices
 * whose charge has one; and `return_pending`, set when the linked charge's return is recorded (0038),
 * so the settle-returned step reads only those.
 */

import { PgClient } from "@effect/sql-pg";
import { Array as Arr, Context, Effect, Layer, Schema } from "effect";
import { type Fragment, lockRows, type PageRequest, pageRows, relation, selectRows } from "../db/query.ts";
import { decodeRows, firstOr, theRow } from "../db/rows.ts";
import { resourceMissing } from "../errors.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import type { InvoiceTotals } from "./invoice-math.ts";
import { INVOICE_COLUMNS, INVOICE_STATUSES, InvoiceRow } from "./invoice-object.ts";

export const INVOICES = relation({
  from: `billing.invoices i JOIN billing.subscriptions s ON s.id = i.subscription_id
    JOIN billing.prices p ON p.id = s.price_id`,
  alias: "i",
  columns: INVOICE_COLUMNS,
  row: InvoiceRow,
});

/** Which open invoices a lock takes: those still in the state the step expects. */
export type InvoiceCondition =
  | { readonly kind: "open" }
  | { readonly kind: "lapsed"; readonly now: number }
  | { readonly kind: "retry_due"; readonly now: number };

export interface NewInvoice {
  readonly id: string;
  readonly scope: MerchantScope;
  readonly subscriptionId: string;
  readonly period: number;
  readonly periodStart: number;
  readonly periodEnd: number;
  readonly totals: InvoiceTotals;
  /** Written `void` or `uncollectible` without a charge while collection is paused; default open. */
  readonly status?: "open" | "void" | "uncollectible";
  /** Its first charge attempt is made in the transaction that writes it (counted as `markAttempted` would). */
  readonly attempted: boolean;
  /** That attempt's charge, made in the same transaction; `pending` while it has no outcome. */
  readonly charge: { readonly id: string; readonly pending: boolean } | undefined;
}

/** An open invoice with what charging it needs. */
export interface InvoiceToCharge {
  readonly id: string;
  readonly merchantId: string;
  readonly livemode: boolean;
  readonly total: bigint;
  readonly mandateId: string;
  readonly period: number;
}

const decodeIds = decodeRows(Schema.Struct({ id: Schema.String }));
/** An open invoice whose charge reached an outcome, with what settling it needs. */
const SettlingInvoice = Schema.Struct({
  id: Schema.String,
  subscription_id: Schema.String,
  charge_id: Schema.String,
  mandate_id: Schema.String,
  period: Schema.Number,
  total: Schema.BigIntFromString,
  charge_amount: Schema.BigIntFromString,
  charge_status: Schema.Literals(["pending", "succeeded", "released", "returned", "failed"]),
  failure_code: Schema.NullOr(Schema.String),
  charged_at: Schema.NullOr(Schema.Number),
  next_attempt_at: Schema.NullOr(Schema.Number),
});
export type SettlingInvoice = typeof SettlingInvoice.Type;
const decodeSettling = decodeRows(SettlingInvoice);
const ReturnedInvoice = Schema.Struct({
  id: Schema.String,
  subscription_id: Schema.String,
  status: Schema.Literals(INVOICE_STATUSES),
  period_end: Schema.Number,
  charge_amount: Schema.BigIntFromString,
  returned_at: Schema.NullOr(Schema.Number),
});
export type ReturnedInvoice = typeof ReturnedInvoice.Type;
const decodeReturned = decodeRows(ReturnedInvoice);
const decodeToCharge = decodeRows(
  Schema.Struct({
    id: Schema.String,
    merchant_id: Schema.String,
    livemode: Schema.Boolean,
    total: Schema.BigIntFromString,
    mandate_id: Schema.String,
    period: Schema.Number,
  }),
);
const decodePeriods = decodeRows(Schema.Struct({ subscription_id: Schema.String, period: Schema.Number }));

const decodePeriodTotals = decodeRows(
  Schema.Struct({
    chain_id: Schema.Number,
    token_address: Schema.String,
    status: Schema.Literals(INVOICE_STATUSES),
    count: Schema.Number,
    total: Schema.String,
    returned_count: Schema.Number,
    amount_returned: Schema.String,
  }),
);

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient;
  /** Invoices whose mandate's token its issuer has paused are left for later (nothing is sent for it). */
  const notInPausedTokens = (tokens: ReadonlyArray<string>) =>
    tokens.length === 0
      ? sql``
      : sql`AND NOT EXISTS (SELECT 1 FROM billing.mandates pm WHERE pm.id = s.mandate_id
          AND lower(pm.token_address) = ANY (${tokens}::text[]))`;
  const select = (where: ReadonlyArray<Fragment>) => selectRows(sql, INVOICES, where);
  const condition = (c: InvoiceCondition): Fragment[] => {
    switch (c.kind) {
      case "open":
        return [sql`i.status = 'open'`];
      case "lapsed":
        return [sql`i.status = 'open'`, sql`i.period_end <= ${c.now}`];
      case "retry_due":
        return [sql`i.status = 'open'`, sql`i.next_attempt_at <= ${c.now}`, sql`s.pause_behavior IS NULL`];
    }
  };

  return {
    load: (scope: MerchantScope, id: string) =>
      select([
        sql`i.id = ${id}`,
        sql`i.merchant_id = ${scope.merchantId}`,
        sql`i.livemode = ${scope.livemode}`,
      ]).pipe(Effect.flatMap(firstOr(() => resourceMissing("invoice", id)))),
    reload: (id: string) => select([sql`i.id = ${id}`]).pipe(Effect.flatMap(theRow(`invoice ${id}`))),
    reloadMany: (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.succeed([] as ReadonlyArray<InvoiceRow>)
        : select([sql`i.id = ANY (${ids}::text[])`]),
    page: (scope: MerchantScope, filters: { readonly subscription?: string }, page: PageRequest) =>
      pageRows(
        sql,
        INVOICES,
        [
          sql`i.merchant_id = ${scope.merchantId}`,
          sql`i.livemode = ${scope.livemode}`,
          ...(filters.subscription !== undefined ? [sql`i.subscription_id = ${filters.subscription}`] : []),
        ],
        page,
      ),
    /** The invoices among `ids` still matching the condition, locked in id order; others' skipped. */
    lock: (ids: ReadonlyArray<string>, when: InvoiceCondition) =>
      lockRows(sql, INVOICES, ids, condition(when), { skipLocked: true }),
    /**
     * Fresh planner statistics after many invoices were written at once. Between two boundaries nearly
     * every invoice is paid; with those statistics the lookups of a boundary's open invoices by id or by
     * charge (settling, the charge outcome trigger) scan every open invoice instead (290 ms against
     * 0.8 ms for 500 of 30,000). Skipped when autovacuum or another process is analysing it.
     */
    analyse: Effect.asVoid(sql`ANALYZE (SKIP_LOCKED) billing.invoices`),
    /** Open invoices with what charging them needs (one statement for a batch). */
    toCharge: (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.succeed([] as InvoiceToCharge[])
        : sql`SELECT i.id, i.merchant_id, i.livemode, i.total::text AS total, s.mandate_id, i.period
            FROM billing.invoices i JOIN billing.subscriptions s ON s.id = i.subscription_id
            WHERE i.id = ANY (${ids}::text[])`.pipe(
            Effect.flatMap(decodeToCharge),
            Effect.map((rows) =>
              rows.map((row) => ({
                id: row.id,
                merchantId: row.merchant_id,
                livemode: row.livemode,
                total: row.total,
                mandateId: row.mandate_id,
                period: row.period,
              })),
            ),
          ),

    /**
     * Open invoices of the chain whose charge reached an outcome: succeeded (or later), or failed with no
     * retry scheduled yet, or failed while another charge took its period.
     */
    settleable: (chainId: number, limit: number) =>
      sql`SELECT i.id FROM billing.invoices i JOIN billing.charges c ON c.id = i.charge_id
        WHERE i.status = 'open' AND i.charge_id IS NOT NULL AND NOT i.charge_pending AND i.amount_paid = 0
          AND NOT i.return_pending AND c.chain_id = ${chainId}
          AND (c.status IN ('succeeded', 'released')
            OR (c.status = 'failed' AND (i.next_attempt_at IS NULL OR EXISTS (SELECT 1 FROM billing.charges o
                  WHERE o.mandate_id = c.mandate_id AND o.period = i.period AND o.status <> 'failed'))))
        ORDER BY i.id LIMIT ${limit}`.pipe(
        Effect.flatMap(decodeIds),
        Effect.map((rows) => rows.map((r) => r.id)),
      ),
    /** Those of `ids` still open, locked (others' skipped), with their charge's outcome. */
    lockSettling: (ids: ReadonlyArray<string>) =>
      sql`SELECT i.id, i.subscription_id, c.id AS charge_id, c.mandate_id, i.period, i.total::text AS total,
          c.amount::text AS charge_amount, c.status AS charge_status,
          c.failure_code, c.charged_at::float8 AS charged_at, i.next_attempt_at::float8 AS next_attempt_at
        FROM billing.invoices i JOIN billing.charges c ON c.id = i.charge_id
        WHERE i.id = ANY (${ids}::text[]) AND i.status = 'open' FOR UPDATE OF i SKIP LOCKED`.pipe(
        Effect.flatMap(decodeSettling),
      ),
    /** Invoices of the chain whose charge was returned and that are not settled for it yet. */
    returnPending: (chainId: number, limit: number) =>
      sql`SELECT i.id FROM billing.invoices i JOIN billing.charges c ON c.id = i.charge_id
        WHERE i.return_pending AND c.chain_id = ${chainId} ORDER BY i.id LIMIT ${limit}`.pipe(
        Effect.flatMap(decodeIds),
        Effect.map((rows) => rows.map((r) => r.id)),
      ),
    /** Those of `ids` still waiting to be settled for their charge's return, locked (others' skipped). */
    lockReturned: (ids: ReadonlyArray<string>) =>
      sql`SELECT i.id, i.subscription_id, i.status, i.period_end::float8 AS period_end,
          c.amount::text AS charge_amount, c.ended_at::float8 AS returned_at
        FROM billing.invoices i JOIN billing.charges c ON c.id = i.charge_id
        WHERE i.id = ANY (${ids}::text[]) AND i.return_pending FOR UPDATE OF i SKIP LOCKED`.pipe(
        Effect.flatMap(decodeReturned),
      ),
    /** Open invoices of the chain whose period ended at chain time `now`. */
    lapsed: (chainId: number, now: number, limit: number, pausedTokens: ReadonlyArray<string> = []) =>
      sql`SELECT i.id FROM billing.invoices i JOIN billing.subscriptions s ON s.id = i.subscription_id
        WHERE i.status = 'open' AND s.chain_id = ${chainId} AND i.period_end <= ${now}
          ${notInPausedTokens(pausedTokens)} LIMIT ${limit}`.pipe(
        Effect.flatMap(decodeIds),
        Effect.map((rows) => rows.map((r) => r.id)),
      ),
    /** Open invoices of the chain whose retry is due at chain time `now` (none while collection is paused). */
    retriesDue: (chainId: number, now: number, limit: number, pausedTokens: ReadonlyArray<string> = []) =>
      sql`SELECT i.id FROM billing.invoices i JOIN billing.subscriptions s ON s.id = i.subscription_id
        WHERE i.status = 'open' AND s.chain_id = ${chainId} AND i.next_attempt_at <= ${now}
          AND s.pause_behavior IS NULL ${notInPausedTokens(pausedTokens)} LIMIT ${limit}`.pipe(
        Effect.flatMap(decodeIds),
        Effect.map((rows) => rows.map((r) => r.id)),
      ),

    /** Which of the subscriptions' periods have their invoice already, as `subscription:period`. */
    invoiced: (periods: ReadonlyArray<{ readonly subscriptionId: string; readonly period: number }>) =>
      periods.length === 0
        ? Effect.succeed(new Set<string>())
        : sql`SELECT i.subscription_id, i.period FROM billing.invoices i
            JOIN unnest(${periods.map((p) => p.subscriptionId)}::text[], ${periods.map((p) => p.period)}::int[])
              AS v(subscription_id, period) ON i.subscription_id = v.subscription_id AND i.period = v.period`.pipe(
            Effect.flatMap(decodePeriods),
            Effect.map((rows) => new Set(rows.map((row) => `${row.subscription_id}:${row.period}`))),
          ),
    /**
     * New invoices, open (or void or uncollectible while paused), each with the charge of its first attempt when one was made: written once,
     * rather than written and then linked. The caller holds its subscriptions' locks and checked the
     * periods with `invoiced`, so a period invoiced twice is a bug that rolls the charges back with it.
     */
    insertOpen: (invoices: ReadonlyArray<NewInvoice>) =>
      !Arr.isReadonlyArrayNonEmpty(invoices)
        ? Effect.void
        : Effect.asVoid(
            sql`INSERT INTO billing.invoices ${sql.insert(
              Arr.map(invoices, (invoice) => ({
                id: invoice.id,
                merchant_id: invoice.scope.merchantId,
                livemode: invoice.scope.livemode,
                subscription_id: invoice.subscriptionId,
                period: invoice.period,
                period_start: invoice.periodStart,
                period_end: invoice.periodEnd,
                status: invoice.status ?? "open",
                lines: sql.json(invoice.totals.lines),
                subtotal: invoice.totals.subtotal.toString(),
                discount: invoice.totals.discount.toString(),
                total: invoice.totals.total.toString(),
                starting_credit: invoice.totals.startingCredit.toString(),
                ending_credit: invoice.totals.endingCredit.toString(),
                attempt_count: invoice.attempted ? 1 : 0,
                charge_id: invoice.charge?.id ?? null,
                charge_pending: invoice.charge?.pending ?? false,
              })),
            )}`,
          ),
    /** An attempt is being made: counted, and no retry is due meanwhile. */
    markAttempted: (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.void
        : Effect.asVoid(sql`UPDATE billing.invoices SET attempt_count = attempt_count + 1, next_attempt_at = NULL,
            updated_at = now() WHERE id = ANY (${ids}::text[])`),
    /**
     * Each invoice's charge (the one taking its period), and whether that charge is still pending. The
     * charge is read under a share lock, so an outcome being recorded meanwhile is either seen here or
     * clears `charge_pending` after this commits (migration 0021's trigger).
     */
    linkCharges: (links: ReadonlyArray<{ readonly invoice: string; readonly charge: string }>) =>
      links.length === 0
        ? Effect.void
        : Effect.asVoid(sql`WITH c AS (SELECT id, status FROM billing.charges
              WHERE id = ANY (${links.map((l) => l.charge)}::text[]) FOR SHARE)
            UPDATE billing.invoices i SET charge_id = v.charge, charge_pending = c.status = 'pending',
              return_pending = c.status = 'returned' AND i.amount_returned = 0, updated_at = now()
            FROM unnest(${links.map((l) => l.invoice)}::text[], ${links.map((l) => l.charge)}::text[]) AS v(id, charge)
            JOIN c ON c.id = v.charge
            WHERE i.id = ANY (${links.map((l) => l.invoice)}::text[]) AND i.id = v.id`),
    /** Paid at chain time `paidAt`. */
    markPaid: (paid: ReadonlyArray<{ readonly invoice: string; readonly paidAt: number }>) =>
      paid.length === 0
        ? Effect.void
        : Effect.asVoid(sql`UPDATE billing.invoices i SET status = 'paid', paid_at = v.paid_at,
              next_attempt_at = NULL, failure_code = NULL, updated_at = now()
            FROM unnest(${paid.map((p) => p.invoice)}::text[], ${paid.map((p) => p.paidAt)}::bigint[]) AS v(id, paid_at)
            WHERE i.id = ANY (${paid.map((p) => p.invoice)}::text[]) AND i.id = v.id`),
    /** A failed attempt (`code` why): open with a retry at `retryAt`, or uncollectible when none is left. */
    recordFailedAttempt: (id: string, code: string, firstFailedAt: number, retryAt: number | undefined) =>
      Effect.asVoid(sql`UPDATE billing.invoices SET first_failed_at = ${firstFailedAt}, failure_code = ${code},
          next_attempt_at = ${retryAt ?? null}, status = ${retryAt === undefined ? "uncollectible" : "open"},
          updated_at = now() WHERE id = ${id}`),
    /**
     * Another charge took the invoice's period and paid `amountPaid`, less than its total: open, partly
     * paid, and not retried (the period can take no other charge); its period's end makes it uncollectible.
     */
    recordChargedShort: (id: string, amountPaid: bigint, failedAt: number) =>
      Effect.asVoid(sql`UPDATE billing.invoices SET amount_paid = ${amountPaid.toString()},
          failure_code = 'period_already_charged', first_failed_at = COALESCE(first_failed_at, ${failedAt}),
          next_attempt_at = NULL, updated_at = now() WHERE id = ${id}`),
    /**
     * Its charge was returned (`returned`, what went back, at chain time `returnedAt`): nothing is paid.
     * An open or paid invoice is open again without a retry (the escrow takes one charge per period), or
     * uncollectible once its period ended (`lapsed`); a void or uncollectible one only records it.
     */
    recordReturned: (id: string, returned: bigint, returnedAt: number, lapsed: boolean) =>
      Effect.asVoid(sql`UPDATE billing.invoices SET amount_returned = ${returned.toString()},
          returned_at = ${returnedAt}, return_pending = false, amount_paid = 0, paid_at = NULL,
          status = CASE WHEN status IN ('open', 'paid') THEN ${lapsed ? "uncollectible" : "open"} ELSE status END,
          failure_code = CASE WHEN status IN ('open', 'paid') THEN 'charge_returned' ELSE failure_code END,
          first_failed_at = COALESCE(first_failed_at, ${returnedAt}), next_attempt_at = NULL, updated_at = now()
        WHERE id = ${id}`),
    /** A failed attempt that does not count (the token was paused under it): tried again from `now`. */
    recordUncountedAttempt: (id: string, now: number) =>
      Effect.asVoid(sql`UPDATE billing.invoices SET attempt_count = greatest(attempt_count - 1, 0),
          next_attempt_at = ${now}, updated_at = now() WHERE id = ${id}`),
    markUncollectible: (id: string) =>
      Effect.asVoid(sql`UPDATE billing.invoices SET status = 'uncollectible', next_attempt_at = NULL,
          updated_at = now() WHERE id = ${id}`),
    /** Its subscription ended: open invoices are voided. */
    voidOpenOf: (subscriptionId: string) =>
      Effect.asVoid(sql`UPDATE billing.invoices SET status = 'void', next_attempt_at = NULL, updated_at = now()
        WHERE subscription_id = ${subscriptionId} AND status = 'open'`),

    /**
     * The merchant's invoices of periods starting in `from`..`to` (unix seconds, to exclusive), per
     * chain, token and status: how many, their totals, and what went back to customers of them.
     */
    periodTotals: (scope: MerchantScope, from: number, to: number) =>
      sql`SELECT s.chain_id::float8 AS chain_id, lower(m.token_address) AS token_address, i.status,
            count(*)::float8 AS count, sum(i.total)::text AS total,
            (count(*) FILTER (WHERE i.amount_returned > 0))::float8 AS returned_count,
            sum(i.amount_returned)::text AS amount_returned
          FROM billing.invoices i
          JOIN billing.subscriptions s ON s.id = i.subscription_id
          JOIN billing.mandates m ON m.id = s.mandate_id
          WHERE i.merchant_id = ${scope.merchantId} AND i.livemode = ${scope.livemode}
            AND i.period_start >= ${from} AND i.period_start < ${to}
          GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`.pipe(Effect.flatMap(decodePeriodTotals)),
    /** Deletes the invoices of a chain's subscriptions (the local stack's crash recovery). */
    forgetChain: (chainId: number) =>
      Effect.asVoid(sql`DELETE FROM billing.invoices i USING billing.subscriptions s
        WHERE s.id = i.subscription_id AND s.chain_id = ${chainId}`),
  };
});

export class InvoiceStore extends Context.Service<InvoiceStore>()("InvoiceStore", { make }) {
  static readonly layer = Layer.effect(InvoiceStore, make);
}
