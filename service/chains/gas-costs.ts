/**
 * Gas cost, accounted: the one writer of `billing.gas_carried`, `billing.gas_costs` and
 * `billing.gas_cost_shares` (migration 0037).
 *
 * - Whoever submits a relayer transaction says, in the same database transaction, which objects it
 *   carries (`carries`): a batch's charges, a sweep's payments, an authorisation's mandate. The owner
 *   tables' purpose columns cannot tell it later: a release's or a sweep's is cleared or overwritten.
 * - When the tracker records a receipt (mined or reverted: a revert costs gas too), `recordFinal` keeps
 *   the cost (gas used × effective price + the L1 fee) and splits it over the carried objects, the
 *   carrier's and its items' (`splitCost`: shares that sum to the total). A superseded replacement was
 *   never mined and costs nothing. A transaction that carried nothing known gets one share without a
 *   merchant, so the shares of a chain always sum to what its relayer paid.
 * - Merchants read their objects' shares; operators the totals per chain (CLI, `/metrics`).
 * - The cost tables have no foreign key to `billing.relayer_transactions`, so they outlive any pruning
 *   of it.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { type Fragment, fixed, type Page, pageRows, relation } from "../db/query.ts";
import { decodeRows } from "../db/rows.ts";
import { type InvalidRequest, invalidParam } from "../errors.ts";
import { newId } from "../ids.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { recordMetric } from "../metrics/metrics.ts";
import { nativeCurrencyOf, type ResolvedChain } from "./config.ts";
import {
  GAS_KINDS,
  GAS_SOURCE_TYPES,
  type GasCostObject,
  type GasCostTotalList,
  type GasCostTotalsQuery,
  type GasKind,
  type GasSourceType,
  type ListGasCostsQuery,
} from "./gas-cost-object.ts";
import { splitCost } from "./gas-shares.ts";

/** The owner table of each kind of object a transaction can carry (fixed text, never a caller's). */
const OWNER_TABLE: Record<GasSourceType, string> = {
  charge: "billing.charges",
  payment: "billing.payments",
  mandate: "billing.mandates",
};

/** A final receipt, as the tracker reads it. */
export interface FinalReceipt {
  readonly status: "mined" | "reverted";
  readonly blockNumber: bigint;
  readonly hash: string;
  readonly gasUsed: bigint;
  readonly effectiveGasPrice: bigint;
  readonly l1FeeWei: bigint | undefined;
}

/** The relayer row a receipt belongs to (the carrier, when it carried items). */
export interface FinalTransaction {
  readonly id: string;
  readonly chain_id: number;
  readonly from_address: string;
  readonly purpose: string;
}

const ShareRow = Schema.Struct({
  id: Schema.String,
  livemode: Schema.Boolean,
  created: Schema.Number,
  chain: Schema.Number,
  native_currency: Schema.String,
  amount_wei: Schema.String,
  kind: Schema.Literals(GAS_KINDS),
  source: Schema.String,
  source_type: Schema.Literals(GAS_SOURCE_TYPES),
  hash: Schema.String,
  block_number: Schema.Number,
  status: Schema.Literals(["mined", "reverted"]),
  gas_used: Schema.String,
  effective_gas_price: Schema.String,
  l1_fee_wei: Schema.String,
  total_wei: Schema.String,
  objects: Schema.Number,
});
type ShareRow = typeof ShareRow.Type;

const SHARES = relation({
  from: "billing.gas_cost_shares s JOIN billing.gas_costs g ON g.relayer_transaction_id = s.relayer_transaction_id",
  alias: "s",
  columns: `s.id, s.livemode, floor(extract(epoch FROM s.created_at))::float8 AS created,
    s.chain_id::int AS chain, g.native_currency, s.amount_wei::text AS amount_wei, s.kind,
    s.object_id AS source, s.object AS source_type, g.transaction_hash AS hash,
    g.block_number::float8 AS block_number, g.status, g.gas_used::text AS gas_used,
    g.effective_gas_price::text AS effective_gas_price, g.l1_fee_wei::text AS l1_fee_wei,
    g.total_wei::text AS total_wei, g.objects`,
  row: ShareRow,
});

const toObject = (row: ShareRow): GasCostObject => ({
  id: row.id,
  object: "gas_cost",
  livemode: row.livemode,
  created: row.created,
  chain: row.chain,
  native_currency: row.native_currency,
  amount_wei: row.amount_wei,
  kind: row.kind,
  source: row.source,
  source_type: row.source_type,
  transaction: {
    hash: row.hash,
    block_number: row.block_number,
    status: row.status,
    gas_used: row.gas_used,
    effective_gas_price: row.effective_gas_price,
    l1_fee_wei: row.l1_fee_wei,
    total_wei: row.total_wei,
    objects: row.objects,
  },
});

const decodeCarried = decodeRows(
  Schema.Struct({
    object_id: Schema.String,
    object: Schema.Literals(GAS_SOURCE_TYPES),
    kind: Schema.String,
    merchant_id: Schema.String,
    livemode: Schema.Boolean,
  }),
);
const decodeInserted = decodeRows(Schema.Struct({ relayer_transaction_id: Schema.String }));
const decodeMonthly = decodeRows(
  Schema.Struct({
    month: Schema.String,
    chain: Schema.Number,
    livemode: Schema.Boolean,
    native_currency: Schema.String,
    amount_wei: Schema.String,
    count: Schema.Number,
  }),
);
const ChainTotal = Schema.Struct({
  chain_id: Schema.Number,
  native_currency: Schema.String,
  transactions: Schema.Number,
  reverted: Schema.Number,
  total_wei: Schema.BigIntFromString,
  l1_fee_wei: Schema.BigIntFromString,
});
export type ChainGasTotal = typeof ChainTotal.Type;
const decodeChainTotals = decodeRows(ChainTotal);

/** A `from`/`to` range of unix seconds, checked: `from` after `to` is the caller's mistake. */
const checkRange = (query: GasCostTotalsQuery): Effect.Effect<void, InvalidRequest> =>
  query.from !== undefined && query.to !== undefined && query.from > query.to
    ? Effect.fail(invalidParam("to", "`to` must not be earlier than `from`."))
    : Effect.void;

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;

  const rangeOf = (query: GasCostTotalsQuery): ReadonlyArray<Fragment> => [
    ...(query.chain !== undefined ? [sql`s.chain_id = ${query.chain}`] : []),
    ...(query.from !== undefined ? [sql`s.created_at >= to_timestamp(${query.from})`] : []),
    ...(query.to !== undefined ? [sql`s.created_at < to_timestamp(${query.to})`] : []),
  ];
  const inScope = (scope: MerchantScope) => [
    sql`s.merchant_id = ${scope.merchantId}`,
    sql`s.livemode = ${scope.livemode}`,
  ];

  /**
   * Records that the transaction named `purpose` carries these objects (`kind`: what it does for them).
   * In the submitting transaction; the objects' merchant and mode come from their owner table. Submitting
   * the same purpose again records nothing new.
   */
  const carries = (
    chainId: number,
    purpose: string,
    kind: GasKind,
    object: GasSourceType,
    ids: ReadonlyArray<string>,
  ) =>
    ids.length === 0
      ? Effect.void
      : Effect.asVoid(sql`INSERT INTO billing.gas_carried (chain_id, purpose, object_id, object, kind, merchant_id, livemode)
          SELECT ${chainId}, ${purpose}, o.id, ${object}, ${kind}, o.merchant_id, o.livemode
          FROM ${fixed(OWNER_TABLE[object])} o WHERE o.id = ANY (${ids}::text[])
          ON CONFLICT DO NOTHING`);

  /**
   * The cost of a transaction whose receipt the tracker records now, split over what it carried. In the
   * tracker's transaction, beside the receipt; once per transaction (a second call changes nothing).
   */
  const recordFinal = (chain: ResolvedChain, tx: FinalTransaction, receipt: FinalReceipt) =>
    Effect.gen(function* () {
      const at = new Date(yield* Clock.currentTimeMillis);
      const carried = yield* sql`SELECT c.object_id, c.object, c.kind, c.merchant_id, c.livemode
          FROM billing.gas_carried c
          WHERE c.chain_id = ${tx.chain_id} AND c.purpose IN (
            SELECT ${tx.purpose}::text
            UNION ALL SELECT r.purpose FROM billing.relayer_transactions r WHERE r.carrier_id = ${tx.id})
          ORDER BY c.object_id, c.purpose`.pipe(Effect.flatMap(decodeCarried));
      const l1Fee = receipt.l1FeeWei ?? 0n;
      const total = receipt.gasUsed * receipt.effectiveGasPrice + l1Fee;
      const currency = nativeCurrencyOf(chain).symbol;
      const inserted = yield* sql`INSERT INTO billing.gas_costs ${sql.insert({
        relayer_transaction_id: tx.id,
        chain_id: tx.chain_id,
        native_currency: currency,
        from_address: tx.from_address,
        transaction_hash: receipt.hash,
        block_number: receipt.blockNumber.toString(),
        status: receipt.status,
        gas_used: receipt.gasUsed.toString(),
        effective_gas_price: receipt.effectiveGasPrice.toString(),
        l1_fee_wei: l1Fee.toString(),
        total_wei: total.toString(),
        objects: carried.length,
        created_at: at,
      })} ON CONFLICT DO NOTHING RETURNING relayer_transaction_id`.pipe(Effect.flatMap(decodeInserted));
      if (inserted.length === 0) return;
      const amounts = splitCost(total, carried.length);
      const shares: Array<Record<string, unknown>> = [];
      for (const [i, amount] of amounts.entries()) {
        const object = carried[i];
        shares.push({
          id: yield* newId("gasCost"),
          relayer_transaction_id: tx.id,
          chain_id: tx.chain_id,
          merchant_id: object?.merchant_id ?? null,
          livemode: object?.livemode ?? null,
          object: object?.object ?? null,
          object_id: object?.object_id ?? null,
          kind: object?.kind ?? "other",
          amount_wei: amount.toString(),
          created_at: at,
        });
      }
      const [first, ...rest] = shares;
      if (first !== undefined)
        yield* sql`INSERT INTO billing.gas_cost_shares ${sql.insert([first, ...rest])}`;
      yield* recordMetric((m) =>
        m.relayerGasSpent.inc({ chain_id: String(tx.chain_id), native_currency: currency }, Number(total)),
      );
    });

  const list = (
    scope: MerchantScope,
    query: ListGasCostsQuery,
  ): Effect.Effect<Page<GasCostObject>, InvalidRequest | SqlError.SqlError> =>
    Effect.gen(function* () {
      yield* checkRange(query);
      const page = yield* pageRows(
        sql,
        SHARES,
        [
          ...inScope(scope),
          ...rangeOf(query),
          ...(query.source !== undefined ? [sql`s.object_id = ${query.source}`] : []),
          ...(query.kind !== undefined ? [sql`s.kind = ${query.kind}`] : []),
        ],
        query,
      );
      return { ...page, data: page.data.map(toObject) };
    });

  /** The merchant's costs per calendar month (UTC) and chain, newest month first. */
  const monthlyTotals = (
    scope: MerchantScope,
    query: GasCostTotalsQuery,
  ): Effect.Effect<GasCostTotalList, InvalidRequest | SqlError.SqlError> =>
    Effect.gen(function* () {
      yield* checkRange(query);
      const rows = yield* sql`SELECT to_char(s.created_at AT TIME ZONE 'UTC', 'YYYY-MM') AS month,
            s.chain_id::int AS chain, s.livemode, g.native_currency, sum(s.amount_wei)::text AS amount_wei,
            count(*)::int AS count
          FROM billing.gas_cost_shares s JOIN billing.gas_costs g ON g.relayer_transaction_id = s.relayer_transaction_id
          WHERE ${sql.and([...inScope(scope), ...rangeOf(query)])}
          GROUP BY 1, 2, 3, 4 ORDER BY 1 DESC, 2`.pipe(Effect.flatMap(decodeMonthly));
      return {
        object: "list",
        data: rows.map((row) => ({ object: "gas_cost_total", ...row })),
        has_more: false,
      };
    });

  /** What the relayer paid per chain (every merchant's and none's), for operators. */
  const chainTotals = (filter: { readonly chainId?: number; readonly since?: Date }) =>
    sql`SELECT chain_id::int AS chain_id, native_currency, count(*)::int AS transactions,
        (count(*) FILTER (WHERE status = 'reverted'))::int AS reverted,
        sum(total_wei)::text AS total_wei, sum(l1_fee_wei)::text AS l1_fee_wei
      FROM billing.gas_costs
      WHERE ${sql.and([
        ...(filter.chainId !== undefined ? [sql`chain_id = ${filter.chainId}`] : []),
        ...(filter.since !== undefined ? [sql`created_at >= ${filter.since}`] : []),
      ])}
      GROUP BY 1, 2 ORDER BY 1, 2`.pipe(Effect.flatMap(decodeChainTotals));

  /** Deletes a chain's costs (the local stack's crash recovery: the blocks that paid them are gone). */
  const forgetChain = (chainId: number) =>
    Effect.gen(function* () {
      yield* sql`DELETE FROM billing.gas_cost_shares WHERE chain_id = ${chainId}`;
      yield* sql`DELETE FROM billing.gas_costs WHERE chain_id = ${chainId}`;
      yield* sql`DELETE FROM billing.gas_carried WHERE chain_id = ${chainId}`;
    });

  return { carries, recordFinal, list, monthlyTotals, chainTotals, forgetChain };
});

export class GasCosts extends Context.Service<GasCosts>()("GasCosts", { make }) {
  static readonly layer = Layer.effect(GasCosts, make);
}
