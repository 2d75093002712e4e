/**
 * Plan changes (`POST /v1/subscriptions/{id}` with `price` or `coupon`): made at once with prorations on
 * the next invoice, at the next period boundary, or kept as a pending update while the next invoice with
 * them would exceed the mandate's cap in force (Stripe's `payment_behavior=pending_if_incomplete`). The
 * billing worker applies a pending update once the customer has signed a higher cap, expires it, and
 * makes scheduled changes at their boundary. The same request pauses and resumes collection
 * (`pause_collection`). A change never charges: a mandate collects at most once a
 * period, so its prorations wait for the next invoice. Pure rules: proration.ts. Rules for users:
 * docs/subscriptions.md, "Plan changes".
 */
import { Context, Effect, Layer, Schema } from "effect";
import type { SqlError } from "effect/sql";
import { periodIndexAt, periodStart } from "../../src/ledger/period.ts";
import { ChainHeads } from "../chains/chain-heads.ts";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { unavailable } from "../chains/unavailable.ts";
import { InvalidRequest, invalidParam, type NotFound, type Unavailable } from "../errors.ts";
import { Outbox } from "../events/outbox.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { Coupons } from "./coupons.ts";
import { InvoiceDrafts } from "./invoice-draft.ts";
import { discountApplies, type InvoiceTotals } from "./invoice-math.ts";
import { type PriceRow, Prices } from "./prices.ts";
import {
  decideChange,
  discountedAmount,
  PAYMENT_BEHAVIORS,
  type PaymentBehavior,
  pendingExpiresAt,
  prorationLines,
} from "./proration.ts";
import {
  CHANGE_EFFECTIVE,
  PAUSE_BEHAVIORS,
  type PendingChange,
  PRORATION_BEHAVIORS,
  type StoredProration,
  type SubscriptionObject,
  type SubscriptionRow,
} from "./subscription-object.ts";
import { type AppliedChange, SubscriptionStore } from "./subscription-store.ts";
import { couponAmountOff, missingReference, Subscriptions } from "./subscriptions.ts";
import { upcomingChargeObject } from "./upcoming-charge.ts";

export const UpdateSubscription = Schema.Struct({
  price: Schema.optionalKey(
    Schema.String.annotate({ description: "price_… (active, in the mandate's chain and token)" }),
  ),
  coupon: Schema.optionalKey(
    Schema.NullOr(Schema.String).annotate({
      description: "cpn_… to replace the coupon (its months count from the next invoice), null to remove it",
    }),
  ),
  proration_behavior: Schema.optionalKey(
    Schema.Literals(PRORATION_BEHAVIORS).annotate({
      description:
        "create_prorations (default): the old price's unused time is credited and the new price's remaining time charged on the next invoice; none: the new price from the next invoice",
    }),
  ),
  effective: Schema.optionalKey(
    Schema.Literals(CHANGE_EFFECTIVE).annotate({
      description: "now (default), or period_end: at the next period boundary, without prorations",
    }),
  ),
  payment_behavior: Schema.optionalKey(
    Schema.Literals(PAYMENT_BEHAVIORS).annotate({
      description:
        "When the next invoice with the change would exceed the mandate's cap: pending_if_incomplete (default) keeps it as pending_update until the customer signs a higher cap; error_if_incomplete refuses it (400 mandate_cap_exceeded)",
    }),
  ),
  pause_collection: Schema.optionalKey(
    Schema.NullOr(
      Schema.Struct({
        behavior: Schema.Literals(PAUSE_BEHAVIORS),
        resumes_at: Schema.optionalKey(
          Schema.NullOr(Schema.Int.annotate({ description: "Chain time collection resumes by itself" })),
        ),
      }),
    ).annotate({ description: "Pause collection (void or mark_uncollectible), or null to resume" }),
  ),
}).annotate({ identifier: "UpdateSubscriptionRequest" });
export type UpdateSubscription = typeof UpdateSubscription.Type;

/** A change as asked, before it is decided. */
interface ChangeRequest {
  readonly price: PriceRow;
  readonly couponId: string | null;
  readonly couponChanged: boolean;
  readonly prorationBehavior: (typeof PRORATION_BEHAVIORS)[number];
  readonly effective: (typeof CHANGE_EFFECTIVE)[number];
  readonly paymentBehavior: PaymentBehavior;
  /** Chain time it was first asked for (a pending update keeps it). */
  readonly created: number;
  readonly key: string;
}

/** What a change would be: its decision, the row it makes, and the next invoice with it. */
interface Evaluation {
  readonly decision: "apply" | "pending" | "refuse";
  readonly applied: AppliedChange;
  readonly nextPeriod: number;
  readonly nextTotal: bigint;
  readonly next: InvoiceTotals;
}

/** How the change was reached, for its event. */
type Trigger = "request" | "pending" | "boundary";

const billing = (row: SubscriptionRow) => row.status === "active" || row.status === "past_due";

/**
 * The period the next invoice is for: the one after the period billed and in progress, or the period
 * the chain is in when that one is still to be billed (its boundary is due, or nothing was billed yet).
 */
const nextPeriodOf = (row: SubscriptionRow, now: number) => {
  const chainPeriod = periodIndexAt(row.anchor, now);
  return billing(row) && row.current_period !== null && chainPeriod === row.current_period
    ? row.current_period + 1
    : (chainPeriod ?? 0);
};

const make = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const heads = yield* ChainHeads;
  const prices = yield* Prices;
  const coupons = yield* Coupons;
  const drafts = yield* InvoiceDrafts;
  const store = yield* SubscriptionStore;
  const subscriptions = yield* Subscriptions;
  const outbox = yield* Outbox;

  /** The percentage off in force in `period` (an amount off does not change with the price). */
  const percentOffIn = (row: SubscriptionRow, period: number) =>
    Effect.gen(function* () {
      if (row.coupon_id === null) return null;
      const window = { start: row.discount_start_period, end: row.discount_end_period };
      if (!discountApplies(period, window)) return null;
      return (yield* coupons.byIds([row.coupon_id])).get(row.coupon_id)?.percent_off_bps ?? null;
    });

  const evaluate = (chain: ResolvedChain, row: SubscriptionRow, change: ChangeRequest, now: number) =>
    Effect.gen(function* () {
      const nextPeriod = nextPeriodOf(row, now);
      const current = row.current_period;
      let prorations: ReadonlyArray<StoredProration> = row.prorations;
      // Only a period that was billed, and is in progress, has time to prorate; a paused one was not paid.
      if (
        change.effective === "now" &&
        change.prorationBehavior === "create_prorations" &&
        change.price.id !== row.price_id &&
        current !== null &&
        nextPeriod === current + 1 &&
        row.pause_behavior === null
      ) {
        const oldPrice = yield* prices.byId(row.price_id);
        const percent = yield* percentOffIn(row, current);
        const from = periodStart(row.anchor, current);
        const to = periodStart(row.anchor, current + 1);
        const lines = prorationLines({
          periodStart: from,
          periodEnd: to,
          at: now,
          oldAmount: discountedAmount(BigInt(oldPrice.amount), percent),
          newAmount: discountedAmount(BigInt(change.price.amount), percent),
          oldName: oldPrice.product_name,
          newName: change.price.product_name,
        });
        prorations = [
          ...prorations,
          ...lines.map((line) => ({
            description: line.description,
            amount: line.amount.toString(),
            price: change.price.id,
            period: current,
            from: now,
            to,
          })),
        ];
      }
      const applied: AppliedChange = {
        priceId: change.price.id,
        couponId: change.couponId,
        resetDiscount: change.couponChanged,
        prorations,
      };
      const changed: SubscriptionRow = {
        ...row,
        price_id: change.price.id,
        coupon_id: change.couponId,
        discount_start_period: change.couponChanged ? null : row.discount_start_period,
        discount_end_period: change.couponChanged ? null : row.discount_end_period,
        prorations,
      };
      const { totals, recurring } = yield* drafts.draft({
        chain,
        subscription: changed,
        price: change.price,
        period: nextPeriod,
      });
      const evaluation: Evaluation = {
        decision: decideChange({ next: totals.total, recurring }, BigInt(row.cap), change.paymentBehavior),
        applied,
        nextPeriod,
        nextTotal: totals.total,
        next: totals,
      };
      return evaluation;
    });

  const raise = (
    row: SubscriptionRow,
    type:
      | "subscription.updated"
      | "subscription.pending_update_applied"
      | "subscription.pending_update_expired"
      | "subscription.paused"
      | "subscription.resumed",
    key: string,
  ) =>
    Effect.gen(function* () {
      const after = yield* store.reload(row.id);
      yield* outbox.raise({
        merchantId: after.merchant_id,
        livemode: after.livemode,
        type,
        object: subscriptions.render(after),
        key: `${row.id}:${type}:${key}`,
      });
    });

  const pendingOf = (
    row: SubscriptionRow,
    change: ChangeRequest,
    state: PendingChange["state"],
    evaluation: Evaluation,
    now: number,
  ): PendingChange => ({
    state,
    price: change.price.id,
    coupon: change.couponId,
    coupon_changed: change.couponChanged,
    proration_behavior: change.prorationBehavior,
    effective: change.effective,
    amount: evaluation.nextTotal.toString(),
    cap: row.cap,
    period: evaluation.nextPeriod,
    created: change.created,
    expires_at:
      state === "scheduled"
        ? null
        : ((row.pending_change?.state === "pending" && row.pending_change.key === change.key
            ? row.pending_change.expires_at
            : null) ?? pendingExpiresAt(row.anchor, row.next_billing_at ?? now, now)),
    key: change.key,
  });

  /**
   * Decides a change and records it: made, scheduled for the boundary, pending (with the at-risk warning
   * raised at once, when it first becomes pending), or refused.
   */
  const settle = (
    chain: ResolvedChain,
    row: SubscriptionRow,
    change: ChangeRequest,
    now: number,
    trigger: Trigger,
  ) =>
    Effect.gen(function* () {
      // Before anything was billed (incomplete, trialing) there is no period to wait for the end of.
      const effective = billing(row) ? change.effective : "now";
      const evaluation = yield* evaluate(chain, row, { ...change, effective }, now);
      if (evaluation.decision === "refuse")
        return yield* new InvalidRequest({
          code: "mandate_cap_exceeded",
          message: `The next invoice with this change would be ${evaluation.nextTotal} base units, above the mandate's cap of ${row.cap}; the customer must sign a higher cap first (or use payment_behavior pending_if_incomplete).`,
          param: "price",
        });
      if (evaluation.decision === "apply") {
        if (effective === "period_end" && trigger !== "boundary")
          yield* store.setPendingChange(row.id, pendingOf(row, change, "scheduled", evaluation, now));
        else yield* store.applyChange(row.id, evaluation.applied);
        yield* raise(
          row,
          trigger === "pending" ? "subscription.pending_update_applied" : "subscription.updated",
          change.key,
        );
        return evaluation;
      }
      const wasPending = row.pending_change?.state === "pending" && row.pending_change.key === change.key;
      yield* store.setPendingChange(row.id, pendingOf(row, change, "pending", evaluation, now));
      if (wasPending) return evaluation;
      const after = yield* store.reload(row.id);
      yield* outbox.raise({
        merchantId: row.merchant_id,
        livemode: row.livemode,
        type: "schedule.upcoming_charge_at_risk",
        object: {
          ...upcomingChargeObject({
            chain,
            subscription: after,
            rendered: subscriptions.render(after),
            period: evaluation.nextPeriod,
            totals: evaluation.next,
          }),
          reason: "mandate_cap_exceeded",
        },
        key: `${row.id}:pending_update:${change.key}:mandate_cap_exceeded`,
      });
      if (trigger === "request") yield* raise(row, "subscription.updated", change.key);
      return evaluation;
    });

  /** A stored change as a request again (its price read afresh). */
  const requestOf = (change: PendingChange) =>
    Effect.map(
      prices.byId(change.price),
      (price): ChangeRequest => ({
        price,
        couponId: change.coupon,
        couponChanged: change.coupon_changed,
        prorationBehavior: change.proration_behavior,
        effective: change.effective,
        paymentBehavior: "pending_if_incomplete",
        created: change.created,
        key: change.key,
      }),
    );

  const update = (scope: MerchantScope, id: string, input: UpdateSubscription) =>
    Effect.gen(function* () {
      const row = yield* store.load(scope, id, { lock: true });
      if (row.status === "canceled")
        return yield* new InvalidRequest({
          code: "subscription_canceled",
          message: `Subscription ${id} is canceled: it cannot be changed.`,
          param: null,
        });
      if (input.price === undefined && input.coupon === undefined && input.pause_collection === undefined)
        return yield* invalidParam(
          "price",
          "Say what to change: price, coupon or pause_collection.",
          "parameter_missing",
        );
      const chain = registry.byId(row.chain_id);
      const token = tokenOf(chain, row.token_address);
      if (!chain || !token) return yield* Effect.die(new Error(`subscription ${id} is on an unknown chain`));
      const price =
        input.price === undefined
          ? yield* prices.byId(row.price_id)
          : yield* missingReference("price", prices.load(scope, input.price));
      if (price.id !== row.price_id) {
        if (!price.active)
          return yield* invalidParam(
            "price",
            `Price ${price.id} is deactivated: it takes no new subscriptions or changes.`,
            "price_inactive",
          );
        if (
          price.chain_id !== row.chain_id ||
          price.token_address.toLowerCase() !== row.token_address.toLowerCase()
        )
          return yield* invalidParam(
            "price",
            `Price ${price.id} is in ${tokenOf(registry.byId(price.chain_id), price.token_address)?.symbol ?? price.token_address} on chain ${price.chain_id}; subscription ${id}'s mandate collects ${token.symbol} on chain ${row.chain_id}.`,
            "price_not_applicable",
          );
      }
      const couponId = input.coupon === undefined ? row.coupon_id : input.coupon;
      if (couponId !== null) {
        const coupon = yield* missingReference("coupon", coupons.load(scope, couponId));
        yield* couponAmountOff(coupon, token, price.id);
      }
      const now = yield* heads.latestTime(chain).pipe(Effect.mapError(unavailable));
      const pause = input.pause_collection;
      if (pause !== undefined && pause !== null) {
        if (row.status === "incomplete")
          return yield* invalidParam(
            "pause_collection",
            `Subscription ${id} is incomplete: there is nothing to collect yet.`,
            "subscription_not_billing",
          );
        const resumesAt = pause.resumes_at ?? null;
        if (resumesAt !== null && resumesAt <= now)
          return yield* invalidParam(
            "pause_collection.resumes_at",
            `pause_collection.resumes_at must be after the chain's time now (${now}).`,
          );
      }
      if (input.price !== undefined || input.coupon !== undefined)
        yield* settle(
          chain,
          row,
          {
            price,
            couponId,
            couponChanged: couponId !== row.coupon_id,
            prorationBehavior: input.proration_behavior ?? "create_prorations",
            effective: input.effective ?? "now",
            paymentBehavior: input.payment_behavior ?? "pending_if_incomplete",
            created: now,
            key: `${now}:${price.id}:${couponId ?? "none"}`,
          },
          now,
          "request",
        );
      if (pause !== undefined) {
        const paused = row.pause_behavior !== null;
        yield* store.setPause(
          id,
          pause === null ? null : { behavior: pause.behavior, resumesAt: pause.resumes_at ?? null },
        );
        if (pause !== null || paused)
          yield* raise(row, pause === null ? "subscription.resumed" : "subscription.paused", String(now));
      }
      return subscriptions.render(yield* store.reload(id));
    });

  /** Paused collection resumed at its `resumes_at` (the subscription locked). */
  const resume = (row: SubscriptionRow, now: number) =>
    Effect.gen(function* () {
      if (row.pause_resumes_at === null || row.pause_resumes_at > now) return;
      yield* store.setPause(row.id, null);
      yield* raise(row, "subscription.resumed", String(row.pause_resumes_at));
    });

  const cancelPending = (scope: MerchantScope, id: string) =>
    Effect.gen(function* () {
      const row = yield* store.load(scope, id, { lock: true });
      if (row.pending_change === null)
        return yield* new InvalidRequest({
          code: "pending_update_missing",
          message: `Subscription ${id} has no pending or scheduled change.`,
          param: null,
        });
      yield* store.setPendingChange(id, null);
      yield* raise(row, "subscription.updated", `canceled:${row.pending_change.key}`);
      return subscriptions.render(yield* store.reload(id));
    });

  /**
   * A pending update (the subscription locked): expired at its `expires_at`, applied once the cap in force
   * covers it, otherwise left waiting. Re-decided only when the cap or the next invoice's period moved.
   */
  const reconsider = (chain: ResolvedChain, row: SubscriptionRow, now: number) =>
    Effect.gen(function* () {
      const pending = row.pending_change;
      if (pending === null || pending.state !== "pending") return;
      if (pending.expires_at !== null && pending.expires_at <= now) {
        yield* store.setPendingChange(row.id, null);
        return yield* raise(row, "subscription.pending_update_expired", pending.key);
      }
      if (pending.cap === row.cap && pending.period === nextPeriodOf(row, now)) return;
      yield* settle(chain, row, yield* requestOf(pending), now, "pending");
    }).pipe(Effect.catchTag("InvalidRequest", () => Effect.void));

  /**
   * At the boundary (the subscription locked and due): a scheduled change is made before the period is
   * invoiced, unless its invoice would exceed the cap, when it becomes pending. Returns the row to bill.
   */
  const atBoundary = (chain: ResolvedChain, row: SubscriptionRow, now: number) =>
    Effect.gen(function* () {
      const scheduled = row.pending_change;
      if (scheduled === null || scheduled.state !== "scheduled") return row;
      const request = yield* requestOf(scheduled);
      yield* settle(chain, row, request, now, "boundary");
      return yield* store.reload(row.id);
    }).pipe(Effect.catchTag("InvalidRequest", () => Effect.succeed(row)));

  return { update, cancelPending, reconsider, atBoundary, resume };
});

export class PlanChanges extends Context.Service<
  PlanChanges,
  {
    readonly update: (
      scope: MerchantScope,
      id: string,
      input: UpdateSubscription,
    ) => Effect.Effect<SubscriptionObject, InvalidRequest | NotFound | Unavailable | SqlError.SqlError>;
    readonly cancelPending: (
      scope: MerchantScope,
      id: string,
    ) => Effect.Effect<SubscriptionObject, InvalidRequest | NotFound | SqlError.SqlError>;
    readonly reconsider: (
      chain: ResolvedChain,
      row: SubscriptionRow,
      now: number,
    ) => Effect.Effect<void, SqlError.SqlError>;
    readonly atBoundary: (
      chain: ResolvedChain,
      row: SubscriptionRow,
      now: number,
    ) => Effect.Effect<SubscriptionRow, SqlError.SqlError>;
    readonly resume: (row: SubscriptionRow, now: number) => Effect.Effect<void, SqlError.SqlError>;
  }
>()("PlanChanges") {
  static readonly layer = Layer.effect(PlanChanges, make);
}
