/**
 * Usage records of metered subscriptions. Usage counts in the mandate period the chain is in when it is
 * recorded and is billed with the next period's invoice. A record that would take that invoice above
 * the mandate's cap (what the customer authorised) is kept as `over_limit`, never billed, and raises
 * `usage.limit_exceeded`. Records of one subscription are decided one at a time (its row is locked).
 */
import { PgClient } from "@effect/sql-pg";
import { Context, Effect, Layer, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { periodIndexAt } from "../../src/ledger/period.ts";
import type { Caller } from "../auth/api-keys.ts";
import { ChainClients } from "../chains/chain-clients.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { decodeRows } from "../db/rows.ts";
import { InvalidRequest, type NotFound, Unavailable } from "../errors.ts";
import { raiseEvent } from "../events/outbox.ts";
import { newId } from "../ids.ts";
import { tokenOf } from "../mandates/mandate-object.ts";
import { formatDecimal } from "../money/decimal.ts";
import { PageQuery, pageOf } from "../pagination.ts";
import { draftInvoice } from "./invoice-draft.ts";
import { Prices } from "./prices.ts";
import { Subscriptions } from "./subscriptions.ts";

export const CreateUsageRecord = Schema.Struct({
  quantity: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1_000_000_000 })).annotate({
    description: "Units used, added to this period's usage (1-1,000,000,000)",
  }),
}).annotate({ identifier: "CreateUsageRecordRequest" });

export const ListUsageRecordsQuery = Schema.Struct({ ...PageQuery.fields }).annotate({
  identifier: "ListUsageRecordsQuery",
});

const UsageRow = Schema.Struct({
  id: Schema.String,
  livemode: Schema.Boolean,
  subscription_id: Schema.String,
  period: Schema.Number,
  quantity: Schema.String,
  status: Schema.Literals(["billable", "over_limit"]),
  created_at: Schema.Date,
});
const decodeUsage = decodeRows(UsageRow);
const USAGE_COLUMNS = "id, livemode, subscription_id, period, quantity::text AS quantity, status, created_at";

export const UsageRecordObject = Schema.Struct({
  id: Schema.String.annotate({ description: "ur_…" }),
  object: Schema.Literal("usage_record"),
  livemode: Schema.Boolean,
  subscription: Schema.String,
  quantity: Schema.Int,
  period: Schema.Int.annotate({
    description: "The mandate period the usage counts in; billed with the next",
  }),
  status: Schema.Literals(["billable", "over_limit"]).annotate({
    description: "over_limit: recorded, never charged (it would take the next charge above the cap)",
  }),
  created: Schema.Int,
}).annotate({ identifier: "UsageRecord" });
export type UsageRecordObject = typeof UsageRecordObject.Type;

const render = (row: typeof UsageRow.Type): UsageRecordObject => ({
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
      caller: Caller,
      subscriptionId: string,
      input: typeof CreateUsageRecord.Type,
    ) => Effect.Effect<UsageRecordObject, InvalidRequest | NotFound | Unavailable | SqlError.SqlError>;
    readonly list: (
      caller: Caller,
      subscriptionId: string,
      query: typeof ListUsageRecordsQuery.Type,
    ) => Effect.Effect<
      { object: "list"; data: UsageRecordObject[]; has_more: boolean },
      NotFound | SqlError.SqlError
    >;
  }
>()("Usage") {
  static readonly layer = Layer.effect(
    Usage,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const pg = yield* PgClient.PgClient;
      const registry = yield* ChainRegistry;
      const clients = yield* ChainClients;
      const subscriptions = yield* Subscriptions;
      const prices = yield* Prices;

      const record = (caller: Caller, subscriptionId: string, input: typeof CreateUsageRecord.Type) =>
        Effect.gen(function* () {
          const row = yield* subscriptions.load(caller, subscriptionId, true);
          const refuse = (code: string, message: string) =>
            new InvalidRequest({ code, message, param: null });
          const price = yield* prices.byId(row.price_id);
          if (price.usage_unit_amount === null)
            return yield* refuse(
              "subscription_not_metered",
              `Price ${price.id} has no metered part, so subscription ${row.id} takes no usage.`,
            );
          if (row.status === "canceled" || row.status === "incomplete")
            return yield* refuse(
              "subscription_not_billing",
              `Subscription ${row.id} is ${row.status}: usage is recorded for active or past_due subscriptions only.`,
            );
          const chain = registry.byId(row.chain_id);
          if (!chain) return yield* Effect.die(new Error(`subscription ${row.id} is on an unknown chain`));
          const now = yield* clients.latestTime(chain).pipe(
            Effect.mapError(
              (e) =>
                new Unavailable({
                  code: "chain_unavailable",
                  message: `Chain ${chain.id} did not answer (${e.message}); nothing was recorded, retry later.`,
                }),
            ),
          );
          const period = periodIndexAt(row.anchor, now) ?? 0;
          const { totals } = yield* draftInvoice({
            chain,
            subscription: row,
            price,
            period: period + 1,
            extraUsage: BigInt(input.quantity),
          }).pipe(Effect.provideService(SqlClient.SqlClient, sql));
          const cap = BigInt(row.cap);
          const status = totals.total > cap ? "over_limit" : "billable";
          const id = yield* newId("usageRecord");
          const [inserted] = yield* sql`INSERT INTO billing.usage_records ${sql.insert({
            id,
            merchant_id: row.merchant_id,
            livemode: row.livemode,
            subscription_id: row.id,
            period,
            quantity: input.quantity,
            status,
          })} RETURNING ${sql.literal(USAGE_COLUMNS)}`.pipe(Effect.flatMap(decodeUsage));
          const usage = render(inserted as typeof UsageRow.Type);
          if (status === "over_limit") {
            const decimals = tokenOf(chain, price.token_address)?.decimals ?? 0;
            yield* raiseEvent({
              merchantId: row.merchant_id,
              livemode: row.livemode,
              type: "usage.limit_exceeded",
              object: {
                ...usage,
                next_charge_decimal: formatDecimal(totals.total, decimals),
                cap_decimal: formatDecimal(cap, decimals),
                authorization_url: subscriptions.render(row).authorization_url,
              },
              key: `${id}:limit_exceeded`,
            }).pipe(Effect.provideService(PgClient.PgClient, pg));
          }
          return usage;
        });

      const list = (caller: Caller, subscriptionId: string, query: typeof ListUsageRecordsQuery.Type) =>
        Effect.gen(function* () {
          yield* subscriptions.load(caller, subscriptionId);
          const limit = query.limit ?? 10;
          const params: unknown[] = [subscriptionId];
          let where = "subscription_id = $1";
          if (query.starting_after !== undefined) {
            params.push(query.starting_after);
            where += " AND id < $2";
          }
          const rows = yield* sql
            .unsafe(
              `SELECT ${USAGE_COLUMNS} FROM billing.usage_records WHERE ${where} ORDER BY id DESC LIMIT ${limit + 1}`,
              params,
            )
            .pipe(Effect.flatMap(decodeUsage));
          return pageOf(rows.map(render), limit);
        });

      return { record, list };
    }),
  );
}
