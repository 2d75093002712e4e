/** The one writer of `billing.usage_records`: metered usage as merchants record it, per mandate period. */
import { Context, Effect, Layer, Schema } from "effect";
import { SqlClient } from "effect/sql";
import { type PageRequest, pageRows, relation, selectRows } from "../db/query.ts";
import { decodeRows, theRow } from "../db/rows.ts";
import { newId } from "../ids.ts";
import type { MerchantScope } from "../merchants/scope.ts";

export const USAGE_STATUSES = ["billable", "over_limit"] as const;

export const UsageRow = Schema.Struct({
  id: Schema.String,
  livemode: Schema.Boolean,
  subscription_id: Schema.String,
  period: Schema.Number,
  quantity: Schema.String,
  status: Schema.Literals(USAGE_STATUSES),
  created_at: Schema.Date,
});
export type UsageRow = typeof UsageRow.Type;

const USAGE = relation({
  from: "billing.usage_records u",
  alias: "u",
  columns:
    "u.id, u.livemode, u.subscription_id, u.period, u.quantity::text AS quantity, u.status, u.created_at",
  row: UsageRow,
});
const BillableQuantity = Schema.Struct({
  subscription_id: Schema.String,
  price_id: Schema.String,
  quantity: Schema.BigIntFromString,
});
const decodeQuantities = decodeRows(BillableQuantity);

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  return {
    insert: (usage: {
      readonly scope: MerchantScope;
      readonly subscriptionId: string;
      /** The price in force when the usage is recorded: it is billed at that price's unit amount. */
      readonly priceId: string;
      readonly period: number;
      readonly quantity: number;
      readonly status: (typeof USAGE_STATUSES)[number];
      /** An x402 mandate-scheme payment's nonce: one record per nonce and subscription. */
      readonly x402Nonce?: string;
    }) =>
      Effect.gen(function* () {
        const id = yield* newId("usageRecord");
        yield* sql`INSERT INTO billing.usage_records ${sql.insert({
          id,
          merchant_id: usage.scope.merchantId,
          livemode: usage.scope.livemode,
          subscription_id: usage.subscriptionId,
          price_id: usage.priceId,
          period: usage.period,
          quantity: usage.quantity,
          status: usage.status,
          x402_nonce: usage.x402Nonce ?? null,
        })}`;
        return yield* selectRows(sql, USAGE, [sql`u.id = ${id}`]).pipe(
          Effect.flatMap(theRow(`usage record ${id}`)),
        );
      }),
    /** The record an x402 payment with this nonce made, if any. */
    byX402Nonce: (subscriptionId: string, nonce: string) =>
      selectRows(sql, USAGE, [sql`u.subscription_id = ${subscriptionId}`, sql`u.x402_nonce = ${nonce}`]).pipe(
        Effect.map((rows) => rows[0]),
      ),
    pageForSubscription: (subscriptionId: string, page: PageRequest) =>
      pageRows(sql, USAGE, [sql`u.subscription_id = ${subscriptionId}`], page),
    /**
     * The billable units recorded for each subscription's period, per price they were recorded under
     * (in the order first recorded), in one statement whatever the number of subscriptions.
     */
    billableQuantities: (
      periods: ReadonlyArray<{ readonly subscriptionId: string; readonly period: number }>,
    ) =>
      periods.length === 0
        ? Effect.succeed(new Map<string, ReadonlyArray<typeof BillableQuantity.Type>>())
        : sql`SELECT u.subscription_id, u.price_id, sum(u.quantity)::text AS quantity
            FROM billing.usage_records u
            JOIN unnest(${periods.map((p) => p.subscriptionId)}::text[], ${periods.map((p) => p.period)}::int[])
              AS w(subscription_id, period) ON u.subscription_id = w.subscription_id AND u.period = w.period
            WHERE u.status = 'billable'
            GROUP BY u.subscription_id, u.price_id ORDER BY u.subscription_id, min(u.created_at), u.price_id`.pipe(
            Effect.flatMap(decodeQuantities),
            Effect.map((rows): ReadonlyMap<string, ReadonlyArray<typeof BillableQuantity.Type>> => {
              const bySubscription = new Map<string, Array<typeof BillableQuantity.Type>>();
              for (const row of rows) {
                const quantities = bySubscription.get(row.subscription_id) ?? [];
                quantities.push(row);
                bySubscription.set(row.subscription_id, quantities);
              }
              return bySubscription;
            }),
          ),
    /** Deletes the usage of a chain's subscriptions (the local stack's crash recovery). */
    forgetChain: (chainId: number) =>
      Effect.asVoid(sql`DELETE FROM billing.usage_records u USING billing.subscriptions s
        WHERE s.id = u.subscription_id AND s.chain_id = ${chainId}`),
  };
});

export class UsageStore extends Context.Service<UsageStore>()("UsageStore", { make }) {
  static readonly layer = Layer.effect(UsageStore, make);
}
