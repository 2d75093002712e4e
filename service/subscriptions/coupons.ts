/**
 * Coupons: a percentage or an amount off each invoice, for a number of months from the subscription's
 * first invoice (Stripe's `duration: "repeating"`). An amount-off coupon names its token by symbol and
 * applies only to prices in that token.
 */
import { Context, Effect, Layer, Result, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { type Page, pageRows, relation, renderPage, selectRows } from "../db/query.ts";
import { firstOr, theRow } from "../db/rows.ts";
import { type InvalidRequest, invalidParam, type NotFound, resourceMissing } from "../errors.ts";
import { newId } from "../ids.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { MAX_CAP_UNITS, parseDecimal } from "../money/decimal.ts";
import { PageQuery } from "../pagination.ts";

/** The token's decimals are known only when the coupon meets a price; 18 bounds any token's. */
const MAX_TOKEN_DECIMALS = 18;

export const CreateCoupon = Schema.Struct({
  name: Schema.optionalKey(Schema.String.check(Schema.isBetweenLength(1, 100))),
  percent_off: Schema.optionalKey(
    Schema.Number.check(Schema.isBetween({ minimum: 0.01, maximum: 100 })).annotate({
      description: "0.01-100, at most two decimals; or amount_off_decimal",
    }),
  ),
  amount_off_decimal: Schema.optionalKey(
    Schema.String.annotate({ description: "Amount off each invoice, in `token` units; or percent_off" }),
  ),
  token: Schema.optionalKey(Schema.String.annotate({ description: "Token symbol of amount_off_decimal" })),
  duration_in_months: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 120 })).annotate({
    description: "How many monthly invoices, from the subscription's first, the coupon applies to (1-120)",
  }),
}).annotate({ identifier: "CreateCouponRequest" });
export type CreateCoupon = typeof CreateCoupon.Type;

export const ListCouponsQuery = Schema.Struct({ ...PageQuery.fields }).annotate({
  identifier: "ListCouponsQuery",
});

export const CouponRow = Schema.Struct({
  id: Schema.String,
  merchant_id: Schema.String,
  livemode: Schema.Boolean,
  name: Schema.NullOr(Schema.String),
  percent_off_bps: Schema.NullOr(Schema.Number),
  amount_off_decimal: Schema.NullOr(Schema.String),
  token_symbol: Schema.NullOr(Schema.String),
  duration_in_months: Schema.Number,
  created_at: Schema.Date,
});
export type CouponRow = typeof CouponRow.Type;
const COUPONS = relation({
  from: "billing.coupons k",
  alias: "k",
  columns: `k.id, k.merchant_id, k.livemode, k.name, k.percent_off_bps, k.amount_off_decimal, k.token_symbol,
    k.duration_in_months, k.created_at`,
  row: CouponRow,
});

export const CouponObject = Schema.Struct({
  id: Schema.String.annotate({ description: "cpn_…" }),
  object: Schema.Literal("coupon"),
  livemode: Schema.Boolean,
  name: Schema.NullOr(Schema.String),
  percent_off: Schema.NullOr(Schema.Number),
  amount_off_decimal: Schema.NullOr(Schema.String),
  token: Schema.NullOr(Schema.String),
  duration_in_months: Schema.Int,
  created: Schema.Int,
}).annotate({ identifier: "Coupon" });
export type CouponObject = typeof CouponObject.Type;

export const toCouponObject = (row: CouponRow): CouponObject => ({
  id: row.id,
  object: "coupon",
  livemode: row.livemode,
  name: row.name,
  percent_off: row.percent_off_bps === null ? null : row.percent_off_bps / 100,
  amount_off_decimal: row.amount_off_decimal,
  token: row.token_symbol,
  duration_in_months: row.duration_in_months,
  created: Math.floor(row.created_at.getTime() / 1000),
});

export class Coupons extends Context.Service<
  Coupons,
  {
    readonly create: (
      scope: MerchantScope,
      input: CreateCoupon,
    ) => Effect.Effect<CouponObject, InvalidRequest | SqlError.SqlError>;
    readonly retrieve: (
      scope: MerchantScope,
      id: string,
    ) => Effect.Effect<CouponObject, NotFound | SqlError.SqlError>;
    readonly list: (
      scope: MerchantScope,
      query: typeof ListCouponsQuery.Type,
    ) => Effect.Effect<Page<CouponObject>, InvalidRequest | SqlError.SqlError>;
    readonly load: (
      scope: MerchantScope,
      id: string,
    ) => Effect.Effect<CouponRow, NotFound | SqlError.SqlError>;
    /** The coupons our own records name (subscriptions'), by id: those that exist. */
    readonly byIds: (
      ids: ReadonlyArray<string>,
    ) => Effect.Effect<ReadonlyMap<string, CouponRow>, SqlError.SqlError>;
  }
>()("Coupons") {
  static readonly layer = Layer.effect(
    Coupons,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const inScope = (scope: MerchantScope) => [
        sql`k.merchant_id = ${scope.merchantId}`,
        sql`k.livemode = ${scope.livemode}`,
      ];
      const byIds = (ids: ReadonlyArray<string>) =>
        ids.length === 0
          ? Effect.succeed(new Map<string, CouponRow>())
          : Effect.map(
              selectRows(sql, COUPONS, [sql`k.id = ANY (${[...new Set(ids)]}::text[])`]),
              (rows) => new Map(rows.map((row) => [row.id, row] as const)),
            );

      const load = (scope: MerchantScope, id: string) =>
        selectRows(sql, COUPONS, [sql`k.id = ${id}`, ...inScope(scope)]).pipe(
          Effect.flatMap(firstOr(() => resourceMissing("coupon", id))),
        );

      const create = (scope: MerchantScope, input: CreateCoupon) =>
        Effect.gen(function* () {
          const percent = input.percent_off;
          const amount = input.amount_off_decimal;
          if ((percent === undefined) === (amount === undefined))
            return yield* invalidParam(
              percent === undefined ? "percent_off" : "amount_off_decimal",
              "Give exactly one of percent_off and amount_off_decimal.",
              percent === undefined ? "parameter_missing" : "parameter_invalid",
            );
          let bps: number | null = null;
          if (percent !== undefined) {
            bps = Math.round(percent * 100);
            if (Math.abs(bps - percent * 100) > 1e-6)
              return yield* invalidParam("percent_off", "percent_off has at most two decimals, e.g. 12.5.");
          }
          if (amount !== undefined) {
            const parsed = parseDecimal(amount, MAX_TOKEN_DECIMALS, MAX_CAP_UNITS * 10n ** 18n);
            if (Result.isFailure(parsed))
              return yield* invalidParam(
                "amount_off_decimal",
                `amount_off_decimal ${parsed.failure.message}.`,
              );
            if (input.token === undefined)
              return yield* invalidParam(
                "token",
                "An amount-off coupon names its token.",
                "parameter_missing",
              );
          } else if (input.token !== undefined)
            return yield* invalidParam(
              "token",
              "token goes with amount_off_decimal only.",
              "parameter_unknown",
            );
          const id = yield* newId("coupon");
          yield* sql`INSERT INTO billing.coupons ${sql.insert({
            id,
            merchant_id: scope.merchantId,
            livemode: scope.livemode,
            name: input.name ?? null,
            percent_off_bps: bps,
            amount_off_decimal: amount ?? null,
            token_symbol: input.token ?? null,
            duration_in_months: input.duration_in_months,
          })}`;
          return toCouponObject(
            yield* selectRows(sql, COUPONS, [sql`k.id = ${id}`]).pipe(Effect.flatMap(theRow(`coupon ${id}`))),
          );
        });

      const retrieve = (scope: MerchantScope, id: string) => Effect.map(load(scope, id), toCouponObject);

      const list = (scope: MerchantScope, query: typeof ListCouponsQuery.Type) =>
        Effect.map(pageRows(sql, COUPONS, inScope(scope), query), (page) => renderPage(page, toCouponObject));

      return { create, retrieve, list, load, byIds };
    }),
  );
}
