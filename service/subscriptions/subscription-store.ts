/**
 * The one writer of `billing.subscriptions`: opened with their mandate, activated when the customer has
 * authorised, advanced period by period by billing (with the chain times of their advance warnings),
 * past due while an invoice is retried, and ended. Rows are read with their mandate's terms.
 *
 * One column is also written elsewhere: `activation_due`, set by a trigger on `billing.mandates` when a
 * mandate leaves `pending` (migration 0027), so the activate step reads only what it can activate.
 */
import { Context, Effect, Layer, Schema } from "effect";
import { SqlClient } from "effect/sql";
import { type Fragment, lockRows, type PageRequest, pageRows, relation, selectRows } from "../db/query.ts";
import { decodeRows, firstOr, theRow } from "../db/rows.ts";
import { resourceMissing } from "../errors.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import {
  type CANCELLATION_REASONS,
  type CancellationSource,
  type PauseBehavior,
  type PendingChange,
  type StoredProration,
  SUBSCRIPTION_COLUMNS,
  SubscriptionRow,
  type SubscriptionStatus,
} from "./subscription-object.ts";
import { AT_RISK_LEAD_SECONDS, TRIAL_NOTICE_LEAD_SECONDS } from "./warnings.ts";

export const SUBSCRIPTIONS = relation({
  from: "billing.subscriptions s JOIN billing.mandates m ON m.id = s.mandate_id",
  alias: "s",
  columns: SUBSCRIPTION_COLUMNS,
  row: SubscriptionRow,
});

const decodeIds = decodeRows(Schema.Struct({ id: Schema.String }));

export type CancellationReason = (typeof CANCELLATION_REASONS)[number];

/** The advance-warning checks a billed period schedules (chain times). */
export type WarningCheck = "at_risk_check_at" | "discount_warning_at";

/** Which subscriptions a lock takes: those still in a state the step expects. */
export type SubscriptionCondition =
  | { readonly kind: "incomplete" }
  | { readonly kind: "billing_due"; readonly now: number }
  | { readonly kind: "check_due"; readonly check: WarningCheck; readonly now: number }
  | { readonly kind: "pending_change" }
  | { readonly kind: "trial_notice"; readonly now: number }
  | { readonly kind: "resume_due"; readonly now: number };

/** A billed period: where the subscription now stands. */
export interface Advance {
  readonly id: string;
  readonly period: number;
  readonly nextBillingAt: number;
  /** The period's invoice, when this billing wrote it. */
  readonly invoice: string | null;
  readonly discountStart: number | null;
  readonly discountEnd: number | null;
  readonly atRiskCheckAt: number | null;
  readonly discountWarningAt: number | null;
  /**
   * The subscription's credit after the invoice written now, whose proration lines it consumed; null when
   * no invoice was written (or the invoice was written void, leaving both for the next).
   */
  readonly creditAfter: bigint | null;
}

/** A plan change made: the price and coupon in force from now, and the proration lines waiting. */
export interface AppliedChange {
  readonly priceId: string;
  readonly couponId: string | null;
  /** A new coupon: its discount window starts again with the next invoice. */
  readonly resetDiscount: boolean;
  readonly prorations: ReadonlyArray<StoredProration>;
}

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  /** Subscriptions whose mandate's token its issuer has paused are left for later (nothing is sent for it). */
  const notInPausedTokens = (tokens: ReadonlyArray<string>) =>
    tokens.length === 0
      ? sql``
      : sql`AND NOT EXISTS (SELECT 1 FROM billing.mandates pm WHERE pm.id = billing.subscriptions.mandate_id
          AND lower(pm.token_address) = ANY (${tokens}::text[]))`;
  const select = (where: ReadonlyArray<Fragment>, options?: Parameters<typeof selectRows>[3]) =>
    selectRows(sql, SUBSCRIPTIONS, where, options);
  const inScope = (scope: MerchantScope) => [
    sql`s.merchant_id = ${scope.merchantId}`,
    sql`s.livemode = ${scope.livemode}`,
  ];
  const condition = (c: SubscriptionCondition): Fragment => {
    switch (c.kind) {
      case "incomplete":
        return sql`s.status = 'incomplete'`;
      case "billing_due":
        return sql`s.status IN ('trialing', 'active', 'past_due') AND s.next_billing_at <= ${c.now}`;
      case "check_due":
        return c.check === "at_risk_check_at"
          ? sql`s.at_risk_check_at <= ${c.now}`
          : sql`s.discount_warning_at <= ${c.now}`;
      case "pending_change":
        return sql`s.pending_change IS NOT NULL AND s.status <> 'canceled'`;
      case "trial_notice":
        return sql`s.trial_notice_at <= ${c.now}`;
      case "resume_due":
        return sql`s.pause_resumes_at <= ${c.now}`;
    }
  };
  const reload = (id: string) =>
    select([sql`s.id = ${id}`]).pipe(Effect.flatMap(theRow(`subscription ${id}`)));

  return {
    /** The merchant's subscription, or 404; locked for update when asked (inside a transaction). */
    load: (scope: MerchantScope, id: string, options: { readonly lock?: boolean } = {}) =>
      select([sql`s.id = ${id}`, ...inScope(scope)], options.lock ? { lock: "update" } : {}).pipe(
        Effect.flatMap(firstOr(() => resourceMissing("subscription", id))),
      ),
    reload,
    page: (
      scope: MerchantScope,
      filters: { readonly customer?: string; readonly status?: SubscriptionStatus },
      page: PageRequest,
    ) =>
      pageRows(
        sql,
        SUBSCRIPTIONS,
        [
          ...inScope(scope),
          ...(filters.customer !== undefined ? [sql`s.customer = ${filters.customer}`] : []),
          ...(filters.status !== undefined ? [sql`s.status = ${filters.status}`] : []),
        ],
        page,
      ),
    /** The subscriptions among `ids` still matching the condition, locked in id order; others' skipped. */
    lock: (ids: ReadonlyArray<string>, when: SubscriptionCondition) =>
      lockRows(sql, SUBSCRIPTIONS, ids, [condition(when)], { skipLocked: true }),

    /**
     * Incomplete subscriptions of the chain whose customer has signed (the mandate is no longer pending:
     * `activation_due`, set by a trigger on the mandates, migration 0027). Reads only those, however
     * many checkouts were abandoned.
     */
    authorised: (chainId: number, limit: number) =>
      sql`SELECT id FROM billing.subscriptions
        WHERE status = 'incomplete' AND activation_due AND chain_id = ${chainId} LIMIT ${limit}`.pipe(
        Effect.flatMap(decodeIds),
        Effect.map((rows) => rows.map((r) => r.id)),
      ),
    /** Subscriptions of the chain due for their next invoice at chain time `now`, the longest waiting first. */
    due: (chainId: number, now: number, limit: number, pausedTokens: ReadonlyArray<string> = []) =>
      sql`SELECT id FROM billing.subscriptions
        WHERE chain_id = ${chainId} AND status IN ('trialing', 'active', 'past_due') AND next_billing_at <= ${now}
          ${notInPausedTokens(pausedTokens)}
        ORDER BY next_billing_at LIMIT ${limit}`.pipe(
        Effect.flatMap(decodeIds),
        Effect.map((rows) => rows.map((r) => r.id)),
      ),
    /**
     * Subscriptions of the chain whose advance-warning check is due (and whose charge is not). The
     * at-risk check is always its charge's time less AT_RISK_LEAD_SECONDS (`advance` writes both), so a
     * charge not yet due means a check later than `now` less the lead: the index range then holds only
     * the checks due now, not every subscription due and not billed yet (all N at a boundary).
     */
    checksDue: (chainId: number, check: WarningCheck, now: number, limit: number) =>
      (check === "at_risk_check_at"
        ? sql`SELECT id FROM billing.subscriptions
            WHERE chain_id = ${chainId} AND at_risk_check_at <= ${now}
              AND at_risk_check_at > ${now - AT_RISK_LEAD_SECONDS} AND next_billing_at > ${now} LIMIT ${limit}`
        : sql`SELECT id FROM billing.subscriptions
            WHERE chain_id = ${chainId} AND discount_warning_at <= ${now} AND next_billing_at > ${now} LIMIT ${limit}`
      ).pipe(
        Effect.flatMap(decodeIds),
        Effect.map((rows) => rows.map((r) => r.id)),
      ),

    /** Subscriptions of the chain with a change waiting for the customer's higher cap. */
    pendingChanges: (chainId: number, limit: number) =>
      sql`SELECT id FROM billing.subscriptions
        WHERE chain_id = ${chainId} AND pending_change IS NOT NULL AND pending_change ->> 'state' = 'pending'
          AND status <> 'canceled' LIMIT ${limit}`.pipe(
        Effect.flatMap(decodeIds),
        Effect.map((rows) => rows.map((r) => r.id)),
      ),

    insert: (subscription: {
      readonly id: string;
      readonly scope: MerchantScope;
      readonly customer: string;
      readonly priceId: string;
      readonly mandateId: string;
      readonly chainId: number;
      readonly couponId: string | null;
      /** A trial: chain times it starts (now) and ends (the mandate's anchor). */
      readonly trial: { readonly start: number; readonly end: number } | null;
    }) =>
      // The new row with its mandate's columns, as every read returns it, in the insert's statement.
      sql`WITH s AS (INSERT INTO billing.subscriptions ${sql.insert({
        id: subscription.id,
        merchant_id: subscription.scope.merchantId,
        livemode: subscription.scope.livemode,
        customer: subscription.customer,
        price_id: subscription.priceId,
        mandate_id: subscription.mandateId,
        chain_id: subscription.chainId,
        coupon_id: subscription.couponId,
        status: "incomplete",
        trial_start: subscription.trial?.start ?? null,
        trial_end: subscription.trial?.end ?? null,
      })} RETURNING *)
        SELECT ${SUBSCRIPTIONS.columns} FROM s JOIN billing.mandates m ON m.id = s.mandate_id`.pipe(
        Effect.flatMap(SUBSCRIPTIONS.decode),
        Effect.flatMap(theRow(`new subscription ${subscription.id}`)),
      ),
    /**
     * Their customers authorised (chain time `now`): active with their current period due at once, or, in
     * a trial not over yet, trialing until its end, when the first period is due, with its warnings' checks.
     */
    activate: (ids: ReadonlyArray<string>, now: number) =>
      ids.length === 0
        ? Effect.void
        : Effect.asVoid(sql`UPDATE billing.subscriptions SET
            status = CASE WHEN trial_end > ${now} THEN 'trialing' ELSE 'active' END,
            next_billing_at = CASE WHEN trial_end > ${now} THEN trial_end ELSE ${now} END,
            trial_notice_at = CASE WHEN trial_end - ${TRIAL_NOTICE_LEAD_SECONDS} > ${now}
              THEN trial_end - ${TRIAL_NOTICE_LEAD_SECONDS} END,
            at_risk_check_at = CASE WHEN trial_end - ${AT_RISK_LEAD_SECONDS} > ${now}
              THEN trial_end - ${AT_RISK_LEAD_SECONDS} END,
            updated_at = now() WHERE id = ANY (${ids}::text[])`),
    /** Subscriptions of the chain whose trial-ending notice is due at chain time `now`. */
    trialNoticesDue: (chainId: number, now: number, limit: number) =>
      sql`SELECT id FROM billing.subscriptions
        WHERE chain_id = ${chainId} AND trial_notice_at <= ${now} LIMIT ${limit}`.pipe(
        Effect.flatMap(decodeIds),
        Effect.map((rows) => rows.map((r) => r.id)),
      ),
    /** Subscriptions of the chain whose paused collection resumes by chain time `now`. */
    resumesDue: (chainId: number, now: number, limit: number) =>
      sql`SELECT id FROM billing.subscriptions
        WHERE chain_id = ${chainId} AND pause_resumes_at <= ${now} LIMIT ${limit}`.pipe(
        Effect.flatMap(decodeIds),
        Effect.map((rows) => rows.map((r) => r.id)),
      ),
    /** Collection paused (each period's invoice written `behavior`, nothing charged), or resumed (null). */
    setPause: (
      id: string,
      pause: { readonly behavior: PauseBehavior; readonly resumesAt: number | null } | null,
    ) =>
      Effect.asVoid(sql`UPDATE billing.subscriptions SET pause_behavior = ${pause?.behavior ?? null},
          pause_resumes_at = ${pause?.resumesAt ?? null}, updated_at = now() WHERE id = ${id}`),
    clearTrialNotice: (id: string) =>
      Effect.asVoid(sql`UPDATE billing.subscriptions SET trial_notice_at = NULL WHERE id = ${id}`),
    cancelAtPeriodEnd: (id: string, source: CancellationSource) =>
      Effect.asVoid(sql`UPDATE billing.subscriptions SET cancel_at_period_end = true,
        cancellation_source = ${source}, updated_at = now() WHERE id = ${id}`),
    /** Ended for good; `source`: who asked, when someone did now (a cancellation asked earlier keeps its own). */
    end: (id: string, reason: CancellationReason, source: CancellationSource | null = null) =>
      Effect.asVoid(sql`UPDATE billing.subscriptions SET status = 'canceled', canceled_at = now(),
          cancellation_reason = ${reason}, cancellation_source = COALESCE(cancellation_source, ${source}),
          next_billing_at = NULL, updated_at = now() WHERE id = ${id}`),
    /** An invoice failed and is retried. */
    markPastDue: (id: string) =>
      Effect.asVoid(sql`UPDATE billing.subscriptions SET status = 'past_due', updated_at = now()
        WHERE id = ${id} AND status = 'active'`),
    /** Their invoice was paid. */
    markCurrent: (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.void
        : Effect.asVoid(sql`UPDATE billing.subscriptions SET status = 'active', updated_at = now()
            WHERE id = ANY (${ids}::text[]) AND status = 'past_due'`),
    /** Billed periods, one statement for the batch. */
    advance: (advances: ReadonlyArray<Advance>) => {
      if (advances.length === 0) return Effect.void;
      const rows = advances.map((a) => ({
        id: a.id,
        period: a.period,
        next_billing_at: a.nextBillingAt,
        invoice: a.invoice,
        discount_start: a.discountStart,
        discount_end: a.discountEnd,
        at_risk_check_at: a.atRiskCheckAt,
        discount_warning_at: a.discountWarningAt,
        credit: a.creditAfter === null ? null : a.creditAfter.toString(),
      }));
      return Effect.asVoid(sql`UPDATE billing.subscriptions s SET current_period = v.period,
          next_billing_at = v.next_billing_at, latest_invoice = COALESCE(v.invoice, s.latest_invoice),
          discount_start_period = v.discount_start, discount_end_period = v.discount_end,
          at_risk_check_at = v.at_risk_check_at, discount_warning_at = v.discount_warning_at,
          credit_balance = COALESCE(v.credit, s.credit_balance),
          prorations = CASE WHEN v.credit IS NULL THEN s.prorations ELSE '[]'::jsonb END,
          status = CASE WHEN s.status = 'trialing' THEN 'active' ELSE s.status END, updated_at = now()
        FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS v(id text, period int, next_billing_at bigint,
          invoice text, discount_start int, discount_end int, at_risk_check_at bigint, discount_warning_at bigint,
          credit numeric)
        WHERE s.id = ANY (${rows.map((r) => r.id)}::text[]) AND s.id = v.id`);
    },
    /** A plan change in force; any change waiting is dropped (it was this one, or this one replaces it). */
    applyChange: (id: string, change: AppliedChange) =>
      Effect.asVoid(sql`UPDATE billing.subscriptions SET price_id = ${change.priceId}, coupon_id = ${change.couponId},
          discount_start_period = CASE WHEN ${change.resetDiscount} THEN NULL ELSE discount_start_period END,
          discount_end_period = CASE WHEN ${change.resetDiscount} THEN NULL ELSE discount_end_period END,
          prorations = ${JSON.stringify(change.prorations)}::jsonb, pending_change = NULL, updated_at = now()
        WHERE id = ${id}`),
    /** The one change waiting (pending the customer's cap, or scheduled), or none. */
    setPendingChange: (id: string, change: PendingChange | null) =>
      Effect.asVoid(sql`UPDATE billing.subscriptions
        SET pending_change = ${change === null ? null : JSON.stringify(change)}::jsonb, updated_at = now()
        WHERE id = ${id}`),
    /** A warning check done for this period. */
    clearCheck: (id: string, check: WarningCheck) =>
      Effect.asVoid(
        check === "at_risk_check_at"
          ? sql`UPDATE billing.subscriptions SET at_risk_check_at = NULL WHERE id = ${id}`
          : sql`UPDATE billing.subscriptions SET discount_warning_at = NULL WHERE id = ${id}`,
      ),

    /** Deletes a chain's subscriptions (the local stack's crash recovery); returns how many. */
    forgetChain: (chainId: number) =>
      Effect.map(
        sql`DELETE FROM billing.subscriptions WHERE chain_id = ${chainId} RETURNING id`,
        (rows) => rows.length,
      ),
  };
});

export class SubscriptionStore extends Context.Service<SubscriptionStore>()("SubscriptionStore", { make }) {
  static readonly layer = Layer.effect(SubscriptionStore, make);
}
