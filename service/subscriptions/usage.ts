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

      const record = (scope: MerchantScope, subscriptionId: string, input: typeof CreateUsageRecord.Type) =>
        Effect.gen(function* () {
          const row = yield* subscriptionStore.load(scope, subscriptionId, { lock: true });
          const refuse = (code: ErrorCode, message: string) =>
            new InvalidRequest({ code, message, param: null });
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
          const now = yield* heads.latestTime(chain).pipe(Effect.mapError(unavailable));
          const period = periodIndexAt(row.anchor, now) ?? 0;
          const { totals } = yield* drafts.draft({
            chain,
            subscription: row,
            price,
            period: period + 1,
            extraUsage: BigInt(input.quantity),
          });
          const cap = BigInt(row.cap);
          const status = totals.total > cap ? "over_limit" : "billable";
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
                next_charge_decimal: formatDecimal(totals.total, decimals),
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

      return { record, list };
    }),
  );
}
