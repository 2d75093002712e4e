/**
 * Subscriptions as merchants open, read and cancel them, and their invoices. Opening a subscription
 * opens its mandate (the customer's on-chain authorisation) in the same transaction; billing then
 * follows the mandate's periods (subscriptions/billing/). Records: subscription-store.ts, invoice-store.ts.
 *
 * The mandate's cap is sized by one rule: `cap_decimal` when given (at least the first invoice, the
 * price after its coupon), otherwise the price's monthly amount, undiscounted, so that a discount ending
 * never pushes a charge above it. A price with a metered part needs an explicit `cap_decimal` (the usage it allows).
 */
import { Context, Effect, Layer, Result, Schema } from "effect";
import type { SqlError } from "effect/sql";
import type { Hex } from "viem";
import { requireRecurringOpen } from "../chains/chain-choice.ts";
import { ChainHeads } from "../chains/chain-heads.ts";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import { MerchantChains } from "../chains/merchant-chains.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { unavailable } from "../chains/unavailable.ts";
import { PublicUrl } from "../config/public-url.ts";
import { type Page, renderPage } from "../db/query.ts";
import { InvalidRequest, invalidParam, type NotFound, type Unavailable } from "../errors.ts";
import { Outbox } from "../events/outbox.ts";
import { newId } from "../ids.ts";
import { ApprovalPeriods, DEFAULT_APPROVAL_PERIODS, Mandates } from "../mandates/mandates.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { formatDecimal, MAX_CAP_UNITS, parseDecimal } from "../money/decimal.ts";
import { PageQuery } from "../pagination.ts";
import { Coupons } from "./coupons.ts";
import { discountOf } from "./invoice-math.ts";
import { type InvoiceObject, type InvoiceRow, toInvoiceObject } from "./invoice-object.ts";
import { InvoiceStore } from "./invoice-store.ts";
import { Prices } from "./prices.ts";
import {
  type CancellationSource,
  SUBSCRIPTION_STATUSES,
  type SubscriptionObject,
  type SubscriptionRow,
  toSubscriptionObject,
} from "./subscription-object.ts";
import { type CancellationReason, SubscriptionStore } from "./subscription-store.ts";

/** The longest trial: two years, as Stripe's. */
export const MAX_TRIAL_DAYS = 730;

export const CreateSubscription = Schema.Struct({
  customer: Schema.String.check(Schema.isBetweenLength(1, 500)).annotate({
    description: "Your reference for the customer",
  }),
  price: Schema.String.annotate({ description: "price_… (active)" }),
  coupon: Schema.optionalKey(
    Schema.String.annotate({ description: "cpn_…: a discount for its duration_in_months" }),
  ),
  cap_decimal: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "The mandate's cap per month, at least the first invoice (the price after the coupon); default: the price's undiscounted amount. Required for a price with a metered part. Below the undiscounted price, discount.ending_above_cap warns a week before the discount ends.",
    }),
  ),
  approval_periods: Schema.optionalKey(
    ApprovalPeriods.annotate({
      description: "Months one signature covers (default 12); the customer re-signs on the same link after",
    }),
  ),
  trial_period_days: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_TRIAL_DAYS })).annotate({
      description: `A free trial of this many days (1-${MAX_TRIAL_DAYS}) from now (chain time); or trial_end`,
    }),
  ),
  trial_end: Schema.optionalKey(
    Schema.Int.annotate({
      description:
        "Chain time (unix seconds) the trial ends and the first period starts and is charged; or trial_period_days",
    }),
  ),
}).annotate({ identifier: "CreateSubscriptionRequest" });
export type CreateSubscription = typeof CreateSubscription.Type;

export const CancelSubscription = Schema.Struct({
  at_period_end: Schema.optionalKey(
    Schema.Boolean.annotate({ description: "true: bill no further period, end at the current one's end" }),
  ),
}).annotate({ identifier: "CancelSubscriptionRequest" });

export const ListSubscriptionsQuery = Schema.Struct({
  ...PageQuery.fields,
  customer: Schema.optionalKey(Schema.String),
  status: Schema.optionalKey(Schema.Literals(SUBSCRIPTION_STATUSES)),
}).annotate({ identifier: "ListSubscriptionsQuery" });
export type ListSubscriptionsQuery = typeof ListSubscriptionsQuery.Type;

export const ListInvoicesQuery = Schema.Struct({
  ...PageQuery.fields,
  subscription: Schema.optionalKey(Schema.String),
}).annotate({ identifier: "ListInvoicesQuery" });
export type ListInvoicesQuery = typeof ListInvoicesQuery.Type;

/** A referenced object that does not exist is the request's mistake: 400 naming the parameter. */
const DAY = 86_400;

export const missingReference = <A, R>(
  param: string,
  effect: Effect.Effect<A, NotFound | SqlError.SqlError, R>,
) =>
  effect.pipe(
    Effect.catchTag("NotFound", (error) =>
      Effect.fail(new InvalidRequest({ code: "resource_missing", message: error.message, param })),
    ),
  );

/** The coupon's amount off in the price's token, checked against the price. */
export const couponAmountOff = (
  coupon: { id: string; amount_off_decimal: string | null; token_symbol: string | null },
  token: { symbol: string; decimals: number },
  priceId: string,
) =>
  Effect.gen(function* () {
    if (coupon.amount_off_decimal === null) return null;
    if (coupon.token_symbol?.toLowerCase() !== token.symbol.toLowerCase())
      return yield* invalidParam(
        "coupon",
        `Coupon ${coupon.id} takes ${coupon.amount_off_decimal} ${coupon.token_symbol} off; price ${priceId} is in ${token.symbol}.`,
        "coupon_not_applicable",
      );
    const off = parseDecimal(coupon.amount_off_decimal, token.decimals, MAX_CAP_UNITS);
    if (Result.isFailure(off))
      return yield* invalidParam(
        "coupon",
        `Coupon ${coupon.id}'s amount ${off.failure.message}.`,
        "coupon_not_applicable",
      );
    return off.success;
  });

export class Subscriptions extends Context.Service<
  Subscriptions,
  {
    readonly create: (
      scope: MerchantScope,
      input: CreateSubscription,
    ) => Effect.Effect<SubscriptionObject, InvalidRequest | Unavailable | SqlError.SqlError>;
    readonly retrieve: (
      scope: MerchantScope,
      id: string,
    ) => Effect.Effect<SubscriptionObject, NotFound | SqlError.SqlError>;
    readonly list: (
      scope: MerchantScope,
      query: ListSubscriptionsQuery,
    ) => Effect.Effect<Page<SubscriptionObject>, InvalidRequest | SqlError.SqlError>;
    /**
     * `source`: who asks (you through the API, or the customer on the portal). Ending at the period's end
     * raises `subscription.updated` (cancel_at_period_end true); ending now, `subscription.canceled`.
     */
    readonly cancel: (
      scope: MerchantScope,
      id: string,
      input: typeof CancelSubscription.Type,
      source?: CancellationSource,
    ) => Effect.Effect<SubscriptionObject, NotFound | InvalidRequest | SqlError.SqlError>;
    readonly retrieveInvoice: (
      scope: MerchantScope,
      id: string,
    ) => Effect.Effect<InvoiceObject, NotFound | SqlError.SqlError>;
    readonly listInvoices: (
      scope: MerchantScope,
      query: ListInvoicesQuery,
    ) => Effect.Effect<Page<InvoiceObject>, InvalidRequest | SqlError.SqlError>;
    /** Ends a subscription for good: open invoices are voided and `subscription.canceled` is raised. */
    readonly end: (
      id: string,
      reason: CancellationReason,
      source?: CancellationSource,
    ) => Effect.Effect<void, SqlError.SqlError>;
    readonly render: (row: SubscriptionRow) => SubscriptionObject;
    readonly renderInvoice: (row: InvoiceRow) => InvoiceObject;
  }
>()("Subscriptions") {
  static readonly layer = Layer.effect(
    Subscriptions,
    Effect.gen(function* () {
      const registry = yield* ChainRegistry;
      const heads = yield* ChainHeads;
      const merchantChains = yield* MerchantChains;
      const mandates = yield* Mandates;
      const prices = yield* Prices;
      const coupons = yield* Coupons;
      const store = yield* SubscriptionStore;
      const invoices = yield* InvoiceStore;
      const outbox = yield* Outbox;
      const { url: publicUrl } = yield* PublicUrl;
      const render = (row: SubscriptionRow) =>
        toSubscriptionObject(row, registry.byId(row.chain_id), publicUrl);
      const renderInvoice = (row: InvoiceRow) => toInvoiceObject(row, registry.byId(row.chain_id));

      /** The trial asked for, from now (chain time) to its end; undefined without one. */
      const trialOf = (chain: ResolvedChain, input: CreateSubscription) =>
        Effect.gen(function* () {
          if (input.trial_period_days === undefined && input.trial_end === undefined) return undefined;
          if (input.trial_period_days !== undefined && input.trial_end !== undefined)
            return yield* invalidParam("trial_end", "Give trial_period_days or trial_end, not both.");
          const now = yield* heads.latestTime(chain).pipe(Effect.mapError(unavailable));
          const end = input.trial_end ?? now + (input.trial_period_days ?? 0) * DAY;
          if (end <= now || end > now + MAX_TRIAL_DAYS * DAY)
            return yield* invalidParam(
              "trial_end",
              `trial_end must be after the chain's time now (${now}) and within ${MAX_TRIAL_DAYS} days of it.`,
            );
          return { start: now, end };
        });

      const create = (scope: MerchantScope, input: CreateSubscription) =>
        Effect.gen(function* () {
          const price = yield* missingReference("price", prices.load(scope, input.price));
          if (!price.active)
            return yield* invalidParam(
              "price",
              `Price ${price.id} is deactivated: it takes no new subscriptions (existing ones keep billing).`,
              "price_inactive",
            );
          const chain = registry.byId(price.chain_id);
          const token = tokenOf(chain, price.token_address);
          if (!chain || !token)
            return yield* invalidParam(
              "price",
              `Price ${price.id} is on a chain no longer offered.`,
              "chain_unknown",
            );
          yield* requireRecurringOpen(chain, "price", `, the chain of price ${price.id}`);
          const coupon =
            input.coupon === undefined
              ? undefined
              : yield* missingReference("coupon", coupons.load(scope, input.coupon));
          const amountOff = coupon === undefined ? null : yield* couponAmountOff(coupon, token, price.id);
          const amount = BigInt(price.amount);
          // The first invoice's fixed part: the least a cap can be and still collect anything.
          const firstInvoice =
            coupon === undefined
              ? amount
              : amount -
                discountOf({ coupon: coupon.id, percentOffBps: coupon.percent_off_bps, amountOff }, amount);
          let cap = amount;
          if (input.cap_decimal !== undefined) {
            const parsed = parseDecimal(input.cap_decimal, token.decimals, MAX_CAP_UNITS);
            if (Result.isFailure(parsed))
              return yield* invalidParam("cap_decimal", `cap_decimal ${parsed.failure.message}.`);
            if (parsed.success < firstInvoice || parsed.success === 0n)
              return yield* invalidParam(
                "cap_decimal",
                `cap_decimal ${input.cap_decimal} is below the first invoice's ${formatDecimal(firstInvoice, token.decimals)} ${token.symbol}: it could not be collected.`,
                "cap_too_low",
              );
            cap = parsed.success;
          } else if (price.usage_unit_amount !== null)
            return yield* invalidParam(
              "cap_decimal",
              `Price ${price.id} has a metered part: say with cap_decimal how much a month the customer authorises.`,
              "parameter_missing",
            );
          const config = (yield* merchantChains.current(scope)).find((c) => c.chain === chain.id);
          if (config === undefined)
            return yield* invalidParam(
              "price",
              `You have not configured chain ${chain.id}, the chain of price ${price.id}: set a payout address with POST /v1/merchant/chains first.`,
              "chain_not_configured",
            );
          const trial = yield* trialOf(chain, input);
          const id = yield* newId("subscription");
          const mandate = yield* mandates.open(scope, {
            chain,
            token,
            payee: config.payout_address as Hex,
            cap,
            approvalPeriods: input.approval_periods ?? DEFAULT_APPROVAL_PERIODS,
            customer: input.customer,
            reference: id,
            // A trial's end starts the mandate's periods: its billing day on chain is the trial's end.
            ...(trial ? { anchor: trial.end } : {}),
          });
          const row = yield* store.insert({
            id,
            scope,
            customer: input.customer,
            priceId: price.id,
            mandateId: mandate.id,
            chainId: chain.id,
            couponId: coupon?.id ?? null,
            trial: trial ?? null,
          });
          return render(row);
        });

      const end = (id: string, reason: CancellationReason, source?: CancellationSource) =>
        Effect.gen(function* () {
          yield* store.end(id, reason, source ?? null);
          yield* invoices.voidOpenOf(id);
          const row = yield* store.reload(id);
          yield* outbox.raise({
            merchantId: row.merchant_id,
            livemode: row.livemode,
            type: "subscription.canceled",
            object: render(row),
            key: `${id}:canceled`,
          });
        });

      const cancel = (
        scope: MerchantScope,
        id: string,
        input: typeof CancelSubscription.Type,
        source: CancellationSource = "api",
      ) =>
        Effect.gen(function* () {
          const row = yield* store.load(scope, id, { lock: true });
          if (row.status === "canceled")
            return yield* new InvalidRequest({
              code: "subscription_canceled",
              message: `Subscription ${id} is already canceled.`,
              param: null,
            });
          if (input.at_period_end !== true || row.status === "incomplete") {
            yield* end(id, "requested", source);
            return render(yield* store.reload(id));
          }
          // Asked again: nothing changes and nothing more is raised.
          if (row.cancel_at_period_end) return render(row);
          yield* store.cancelAtPeriodEnd(id, source);
          const updated = render(yield* store.reload(id));
          yield* outbox.raise({
            merchantId: row.merchant_id,
            livemode: row.livemode,
            type: "subscription.updated",
            object: updated,
            key: `${id}:cancel_at_period_end`,
          });
          return updated;
        });

      return {
        create,
        retrieve: (scope: MerchantScope, id: string) => Effect.map(store.load(scope, id), render),
        list: (scope: MerchantScope, query: ListSubscriptionsQuery) =>
          Effect.map(store.page(scope, query, query), (page) => renderPage(page, render)),
        cancel,
        retrieveInvoice: (scope: MerchantScope, id: string) =>
          Effect.map(invoices.load(scope, id), renderInvoice),
        listInvoices: (scope: MerchantScope, query: ListInvoicesQuery) =>
          Effect.map(invoices.page(scope, query, query), (page) => renderPage(page, renderInvoice)),
        end,
        render,
        renderInvoice,
      };
    }),
  );
}
