/**
 * The price catalogue. A price is what a subscription bills each month: a fixed amount in one token on
 * one chain (as a Stripe price has one currency), and optionally a metered part billed per unit used.
 * Deactivating a price stops new subscriptions to it; existing ones keep billing.
 */
import { Context, Effect, Layer, Result, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { getAddress } from "viem";
import { chooseChain, chooseToken } from "../chains/chain-choice.ts";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import { MerchantChains } from "../chains/merchant-chains.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { type Page, pageRows, relation, renderPage, selectRows } from "../db/query.ts";
import { firstOr, theRow } from "../db/rows.ts";
import { type InvalidRequest, invalidParam, type NotFound, resourceMissing } from "../errors.ts";
import { newId } from "../ids.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { formatDecimal, MAX_CAP_UNITS, parseDecimal } from "../money/decimal.ts";
import { PageQuery } from "../pagination.ts";

const Text = (max: number) => Schema.String.check(Schema.isBetweenLength(1, max));

export const CreatePrice = Schema.Struct({
  product_name: Text(250).annotate({ description: "What the customer is billed for, shown on invoices" }),
  amount_decimal: Schema.String.annotate({
    description:
      'Fixed amount per month in the token\'s units, e.g. "19.99"; "0" only for a purely metered price',
  }),
  chain: Schema.optionalKey(
    Schema.Int.annotate({
      description: "EIP-155 chain id; default: your only configured chain of this mode",
    }),
  ),
  token: Schema.optionalKey(
    Schema.String.annotate({
      description: "Token symbol or address; default: the only token you accept there",
    }),
  ),
  usage: Schema.optionalKey(
    Schema.Struct({
      unit_amount_decimal: Schema.String.annotate({
        description: "Price per unit used, in the token's units",
      }),
      unit: Text(40).annotate({ description: 'Name of the unit, e.g. "api_call"' }),
    }).annotate({ description: "A metered part, billed in arrears with the next month's invoice" }),
  ),
}).annotate({ identifier: "CreatePriceRequest" });
export type CreatePrice = typeof CreatePrice.Type;

export const UpdatePrice = Schema.Struct({
  active: Schema.Boolean.annotate({ description: "false: no new subscriptions; existing ones keep billing" }),
}).annotate({ identifier: "UpdatePriceRequest" });

export const ListPricesQuery = Schema.Struct({
  ...PageQuery.fields,
  active: Schema.optionalKey(Schema.Literals(["true", "false"])),
}).annotate({ identifier: "ListPricesQuery" });
export type ListPricesQuery = typeof ListPricesQuery.Type;

export const PriceRow = Schema.Struct({
  id: Schema.String,
  merchant_id: Schema.String,
  livemode: Schema.Boolean,
  product_name: Schema.String,
  chain_id: Schema.Number,
  token_address: Schema.String,
  amount: Schema.String,
  usage_unit_amount: Schema.NullOr(Schema.String),
  usage_unit: Schema.NullOr(Schema.String),
  active: Schema.Boolean,
  created_at: Schema.Date,
});
export type PriceRow = typeof PriceRow.Type;
const PRICES = relation({
  from: "billing.prices p",
  alias: "p",
  columns: `p.id, p.merchant_id, p.livemode, p.product_name, p.chain_id, p.token_address, p.amount::text AS amount,
    p.usage_unit_amount::text AS usage_unit_amount, p.usage_unit, p.active, p.created_at`,
  row: PriceRow,
});

const Decimal = Schema.String.annotate({ description: "Decimal amount in the token's units" });

export const PriceObject = Schema.Struct({
  id: Schema.String.annotate({ description: "price_…" }),
  object: Schema.Literal("price"),
  livemode: Schema.Boolean,
  active: Schema.Boolean,
  product_name: Schema.String,
  chain: Schema.Int,
  token: Schema.String,
  interval: Schema.Literal("month"),
  amount_decimal: Decimal,
  usage: Schema.NullOr(Schema.Struct({ unit_amount_decimal: Decimal, unit: Schema.String })),
  created: Schema.Int,
}).annotate({ identifier: "Price" });
export type PriceObject = typeof PriceObject.Type;

export const decimalsOf = (chain: ResolvedChain | undefined, tokenAddress: string) =>
  tokenOf(chain, tokenAddress)?.decimals ?? 0;

export const toPriceObject = (row: PriceRow, chain: ResolvedChain | undefined): PriceObject => {
  const decimals = decimalsOf(chain, row.token_address);
  return {
    id: row.id,
    object: "price",
    livemode: row.livemode,
    active: row.active,
    product_name: row.product_name,
    chain: row.chain_id,
    token: tokenOf(chain, row.token_address)?.symbol ?? row.token_address,
    interval: "month",
    amount_decimal: formatDecimal(BigInt(row.amount), decimals),
    usage:
      row.usage_unit_amount === null || row.usage_unit === null
        ? null
        : {
            unit_amount_decimal: formatDecimal(BigInt(row.usage_unit_amount), decimals),
            unit: row.usage_unit,
          },
    created: Math.floor(row.created_at.getTime() / 1000),
  };
};

const ZERO = /^0+(\.0+)?$/;

export class Prices extends Context.Service<
  Prices,
  {
    readonly create: (
      scope: MerchantScope,
      input: CreatePrice,
    ) => Effect.Effect<PriceObject, InvalidRequest | SqlError.SqlError>;
    readonly retrieve: (
      scope: MerchantScope,
      id: string,
    ) => Effect.Effect<PriceObject, NotFound | SqlError.SqlError>;
    readonly update: (
      scope: MerchantScope,
      id: string,
      input: typeof UpdatePrice.Type,
    ) => Effect.Effect<PriceObject, NotFound | SqlError.SqlError>;
    readonly list: (
      scope: MerchantScope,
      query: ListPricesQuery,
    ) => Effect.Effect<Page<PriceObject>, InvalidRequest | SqlError.SqlError>;
    readonly load: (
      scope: MerchantScope,
      id: string,
    ) => Effect.Effect<PriceRow, NotFound | SqlError.SqlError>;
    readonly byId: (id: string) => Effect.Effect<PriceRow, SqlError.SqlError>;
  }
>()("Prices") {
  static readonly layer = Layer.effect(
    Prices,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const registry = yield* ChainRegistry;
      const merchantChains = yield* MerchantChains;
      const render = (row: PriceRow) => toPriceObject(row, registry.byId(row.chain_id));

      const inScope = (scope: MerchantScope) => [
        sql`p.merchant_id = ${scope.merchantId}`,
        sql`p.livemode = ${scope.livemode}`,
      ];

      const load = (scope: MerchantScope, id: string) =>
        selectRows(sql, PRICES, [sql`p.id = ${id}`, ...inScope(scope)]).pipe(
          Effect.flatMap(firstOr(() => resourceMissing("price", id))),
        );

      const byId = (id: string) =>
        selectRows(sql, PRICES, [sql`p.id = ${id}`]).pipe(Effect.flatMap(theRow(`price ${id}`)));

      const create = (scope: MerchantScope, input: CreatePrice) =>
        Effect.gen(function* () {
          const configured = yield* merchantChains.list(scope);
          const { chain, config } = yield* chooseChain(registry, scope, configured, input.chain);
          const token = yield* chooseToken(config, input.token);
          const usageAmount =
            input.usage === undefined
              ? undefined
              : parseDecimal(input.usage.unit_amount_decimal, token.decimals, MAX_CAP_UNITS);
          if (usageAmount && Result.isFailure(usageAmount))
            return yield* invalidParam(
              "usage.unit_amount_decimal",
              `usage.unit_amount_decimal ${usageAmount.failure.message}.`,
            );
          let amount = 0n;
          if (!(usageAmount && ZERO.test(input.amount_decimal))) {
            const parsed = parseDecimal(input.amount_decimal, token.decimals, MAX_CAP_UNITS);
            if (Result.isFailure(parsed))
              return yield* invalidParam(
                "amount_decimal",
                `amount_decimal ${parsed.failure.message}${parsed.failure.code === "not_positive" ? " (a price of 0 needs a metered `usage` part)" : ""}.`,
              );
            amount = parsed.success;
          }
          const id = yield* newId("price");
          yield* sql`INSERT INTO billing.prices ${sql.insert({
            id,
            merchant_id: scope.merchantId,
            livemode: scope.livemode,
            product_name: input.product_name,
            chain_id: chain.id,
            token_address: getAddress(token.address),
            amount: amount.toString(),
            usage_unit_amount:
              usageAmount && Result.isSuccess(usageAmount) ? usageAmount.success.toString() : null,
            usage_unit: input.usage?.unit ?? null,
          })}`;
          return render(yield* byId(id));
        });

      const retrieve = (scope: MerchantScope, id: string) => Effect.map(load(scope, id), render);

      const update = (scope: MerchantScope, id: string, input: typeof UpdatePrice.Type) =>
        Effect.gen(function* () {
          yield* load(scope, id);
          yield* sql`UPDATE billing.prices SET active = ${input.active}, updated_at = now() WHERE id = ${id}`;
          return render(yield* byId(id));
        });

      const list = (scope: MerchantScope, query: ListPricesQuery) =>
        Effect.map(
          pageRows(
            sql,
            PRICES,
            [
              ...inScope(scope),
              ...(query.active !== undefined ? [sql`p.active = ${query.active === "true"}`] : []),
            ],
            query,
          ),
          (page) => renderPage(page, render),
        );

      return { create, retrieve, update, list, load, byId };
    }),
  );
}
