/**
 * Usage records of metered subscriptions. Usage counts in the mandate period the chain is in when it is
 * recorded and is billed with the next period's invoice. A record that would take that invoice above
 * the mandate's cap (what the customer authorised) is kept as `over_limit`, never billed, and raises
 * `usage.limit_exceeded`. Records of one subscription are decided one at a time (its row is locked).
 */
import { Context, Effect, Layer, Schema } from "effect";
import type { SqlError } from "effect/sql";
import { periodIndexAt } from "../../src/ledger/period.ts";
import { ChainHeads } from "../chains/chain-heads.ts";
import { tokenOf } from "../chains/config.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { unavailable } from "../chains/unavailable.ts";
import { type Page, renderPage } from "../db/query.ts";
import type { ErrorCode } from "../error-codes.ts";
import { InvalidRequest, type NotFound, type Unavailable } from "../errors.ts";
import { Outbox } from "../events/outbox.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { formatDecimal } from "../money/decimal.ts";
import { PageQuery } from "../pagination.ts";
import { InvoiceDrafts } from "./invoice-draft.ts";
import { Prices } from "./prices.ts";
import type { SubscriptionRow } from "./subscription-object.ts";
import { SubscriptionStore } from "./subscription-store.ts";
import { Subscriptions } from "./subscriptions.ts";
import { USAGE_STATUSES, type UsageRow, UsageStore } from "./usage-store.ts";

export const CreateUsageRecord = Schema.Struct({
  quantity: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1_000_000_000 })).annotate({
    description: "Units used, added to this period's usage (1-1,000,000,000)",
  }),
}).annotate({ identifier: "CreateUsageRecordRequest" });

export const ListUsageRecordsQuery = Schema.Struct({ ...PageQuery.fields }).annotate({
  identifier: "ListUsageRecordsQuery",
});

export const UsageRecordObject = Schema.Struct({
  id: Schema.String.annotate({ description: "ur_…" }),
  object: Schema.Literal("usage_record"),
  livemode: Schema.Boolean,
  subscription: Schema.String,
  quantity: Schema.Int,
  period: Schema.Int.annotate({
    description: "The mandate period the usage counts in; billed with the next",
  }),
  status: Schema.Literals(USAGE_STATUSES).annotate({
    description: "over_limit: recorded, never charged (it would take the next charge above the cap)",
  }),
  created: Schema.Int,
}).annotate({ identifier: "UsageRecord" });
export type UsageRecordObject = typeof UsageRecordObject.Type;

const render = (row: UsageRow): UsageRecordObject => ({
  id: row.id,
  object: "usage_record",
  livemode: row.livemode,
  subscription: row.subscription_id,
  quantity: Number(row.quantity),
  period: row.period,
  status: row.status,
  created: Math.floor(row.created_at.getTime() / 1000),
});

/** Usage that an x402 payment would record: the subscription, the period and the units. */
export interface PaidUsage {
  readonly subscription: SubscriptionRow;
  readonly period: number;
  readonly quantity: bigint;
}

export class Usage extends Context.Service<
  Usage,
  {
    readonly record: (
      scope: MerchantScope,
      subscriptionId: string,
      input: typeof CreateUsageRecord.Type,
    ) => Effect.Effect<UsageRecordObject, InvalidRequest | NotFound | Unavailable | SqlError.SqlError>;
    readonly list: (
      scope: MerchantScope,
      subscriptionId: string,
      query: typeof ListUsageRecordsQuery.Type,
    ) => Effect.Effect<Page<UsageRecordObject>, InvalidRequest | NotFound | SqlError.SqlError>;
    /**
     * Whether `amount` (base units, a whole number of the price's metered unit) can be paid as usage
     * now: the subscription and its mandate as they stand, and the period's usage. Refused: not metered,
     * not billing, not a whole number of units, or above the mandate's cap with the next invoice
     * (`mandate_cap_exceeded`: nothing over the cap is recorded, unlike `record`).
     */
    readonly assessPaid: (
      scope: MerchantScope,
      subscriptionId: string,
      amount: bigint,
    ) => Effect.Effect<PaidUsage, InvalidRequest | NotFound | Unavailable | SqlError.SqlError>;
    /**
     * Records `amount` as usage paid for with x402's mandate scheme, once per `nonce` (the same nonce
     * again: the first record). Run it in a transaction: the subscription's row lock orders the
     * decisions. Refused as `assessPaid` refuses.
     */
    readonly recordPaid: (
      scope: MerchantScope,
      subscriptionId: string,
      amount: bigint,
      nonce: string,
    ) => Effect.Effect<UsageRecordObject, InvalidRequest | NotFound | Unavailable | SqlError.SqlError>;
  }
>()("Usage") {
  static readonly layer = Layer.effect(
    Usage,
    Effect.gen(function* () {
      const registry = yield* ChainRegistry;
      const heads = yield* ChainHeads;
      const subscriptions = yield* Subscriptions;
      const subscriptionStore = yield* SubscriptionStore;
      const prices = yield* Prices;
      const drafts = yield* InvoiceDrafts;
      const store = yield* UsageStore;
      const outbox = yield* Outbox;

      const refuse = (code: ErrorCode, message: string) => new InvalidRequest({ code, message, param: null });

      /** The subscription (locked when asked), its price, and the period and next invoice with `quantity` more. */
      const assess = (
        scope: MerchantScope,
        subscriptionId: string,
        quantity: (price: {
          readonly usage_unit_amount: string | null;
          readonly id: string;
        }) => Effect.Effect<bigint, InvalidRequest>,
        lock: boolean,
      ) =>
        Effect.gen(function* () {
          const row = yield* subscriptionStore.load(scope, subscriptionId, { lock });
          const price = yield* prices.byId(row.price_id);
          if (price.usage_unit_amount === null)
            return yield* refuse(
              "subscription_not_metered",
              `Price ${price.id} has no metered part, so subscription ${row.id} takes no usage.`,
            );
          if (row.status === "canceled" || row.status === "incomplete" || row.status === "trialing")
            return yield* refuse(
              "subscription_not_billing",
              `Subscription ${row.id} is ${row.status}: usage is recorded for active or past_due subscriptions only (nothing is billed during a trial).`,
            );
          const chain = registry.byId(row.chain_id);
          if (!chain) return yield* Effect.die(new Error(`subscription ${row.id} is on an unknown chain`));
          const units = yield* quantity(price);
          const now = yield* heads.latestTime(chain).pipe(Effect.mapError(unavailable));
          const period = periodIndexAt(row.anchor, now) ?? 0;
          const { totals } = yield* drafts.draft({
            chain,
            subscription: row,
            price,
            period: period + 1,
            extraUsage: units,
          });
          return { row, price, chain, period, units, total: totals.total, cap: BigInt(row.cap) };
        });

      const record = (scope: MerchantScope, subscriptionId: string, input: typeof CreateUsageRecord.Type) =>
        Effect.gen(function* () {
          const assessed = yield* assess(
            scope,
            subscriptionId,
            () => Effect.succeed(BigInt(input.quantity)),
            true,
          );
          const { row, price, chain, period, cap, total } = assessed;
          const status = total > cap ? "over_limit" : "billable";
          const usage = render(
            yield* store.insert({
              scope,
              subscriptionId: row.id,
              priceId: price.id,
              period,
              quantity: input.quantity,
              status,
            }),
          );
          if (status === "over_limit") {
            const decimals = tokenOf(chain, price.token_address)?.decimals ?? 0;
            yield* outbox.raise({
              merchantId: row.merchant_id,
              livemode: row.livemode,
              type: "usage.limit_exceeded",
              object: {
                ...usage,
                next_charge_decimal: formatDecimal(total, decimals),
                cap_decimal: formatDecimal(cap, decimals),
                authorization_url: subscriptions.render(row).authorization_url,
              },
              key: `${usage.id}:limit_exceeded`,
            });
          }
          return usage;
        });

      const list = (scope: MerchantScope, subscriptionId: string, query: typeof ListUsageRecordsQuery.Type) =>
        Effect.gen(function* () {
          yield* subscriptionStore.load(scope, subscriptionId);
          return renderPage(yield* store.pageForSubscription(subscriptionId, query), render);
        });

      /** `amount` as a whole number of the price's metered unit. */
      const unitsOf =
        (amount: bigint) => (price: { readonly usage_unit_amount: string | null; readonly id: string }) => {
          const unit = BigInt(price.usage_unit_amount ?? "0");
          if (unit <= 0n || amount <= 0n || amount % unit !== 0n)
            return Effect.fail(
              refuse(
                "parameter_invalid",
                `The amount (${amount} base units) must be a whole number of price ${price.id}'s metered unit (${unit} base units).`,
              ),
            );
          return Effect.succeed(amount / unit);
        };

      const assessPaid = (scope: MerchantScope, subscriptionId: string, amount: bigint, lock = false) =>
        Effect.gen(function* () {
          const assessed = yield* assess(scope, subscriptionId, unitsOf(amount), lock);
          if (assessed.total > assessed.cap) {
            const decimals = tokenOf(assessed.chain, assessed.price.token_address)?.decimals ?? 0;
            return yield* refuse(
              "mandate_cap_exceeded",
              `This usage would take the next charge of subscription ${subscriptionId} to ${formatDecimal(assessed.total, decimals)}, above its mandate's cap of ${formatDecimal(assessed.cap, decimals)} a month. The customer can raise the cap at ${subscriptions.render(assessed.row).authorization_url}.`,
            );
          }
          return {
            subscription: assessed.row,
            period: assessed.period,
            quantity: assessed.units,
          } satisfies PaidUsage;
        });

      const recordPaid = (scope: MerchantScope, subscriptionId: string, amount: bigint, nonce: string) =>
        Effect.gen(function* () {
          yield* subscriptionStore.load(scope, subscriptionId, { lock: true });
          const earlier = yield* store.byX402Nonce(subscriptionId, nonce);
          if (earlier !== undefined) return render(earlier);
          const assessed = yield* assessPaid(scope, subscriptionId, amount, true);
          const usage = yield* store.insert({
            scope,
            subscriptionId,
            priceId: assessed.subscription.price_id,
            period: assessed.period,
            quantity: Number(assessed.quantity),
            status: "billable",
            x402Nonce: nonce,
          });
          return render(usage);
        });

      return { record, list, assessPaid: (scope, id, amount) => assessPaid(scope, id, amount), recordPaid };
    }),
  );
}
