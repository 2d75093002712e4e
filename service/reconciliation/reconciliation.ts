/**
 * Reconciliation for finance teams: every charge, release and return of a merchant's mandates, and
 * every sweep, release and return of its one-time payments, as the chain recorded it (chain id, block,
 * transaction hash, log index) with exact amounts. Read straight from the indexed facts, so it agrees
 * with the chain's logs to the last unit.
 *
 * Only the merchant's own: a fact is listed when it names one of the merchant's payout addresses on the
 * fact's own chain (an address is the merchant's on one chain only), the fact relay has passed it
 * (confirmed, in chain order) and did not decline it. A fact the relay declined names the address but
 * none of the merchant's objects: a deposit anyone deployed with the merchant's payout address and a
 * copied payment id, swept into a hold and returned to its deployer, is not the merchant's payment.
 */
import { Context, Effect, Layer, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { formatUnits } from "viem";
import { chainHeads } from "../chains/onchain.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { ONCHAIN_SCHEMA } from "../db/client.ts";
import { decodeRows } from "../db/rows.ts";
import { DOWNLOAD_FORMATS, DOWNLOAD_PAGE, type Download, pagedDownload } from "../downloads.ts";
import { type InvalidRequest, invalidParam } from "../errors.ts";
import { FactRow } from "../facts/fact-row.ts";
import type { MerchantScope } from "../merchants/scope.ts";

const ENTRY_TYPES = ["charge", "release", "return", "payment", "payment_release", "payment_return"] as const;

const Natural = Schema.FiniteFromString.check(Schema.isInt(), Schema.isGreaterThanOrEqualTo(0));

export const ReconciliationQuery = Schema.Struct({
  chain: Schema.optionalKey(Natural.annotate({ description: "Only this chain (EIP-155 id)" })),
  from_block: Schema.optionalKey(Natural.annotate({ description: "First block, inclusive" })),
  to_block: Schema.optionalKey(Natural.annotate({ description: "Last block, inclusive" })),
  from: Schema.optionalKey(Natural.annotate({ description: "Earliest block time, unix seconds, inclusive" })),
  to: Schema.optionalKey(Natural.annotate({ description: "Latest block time, unix seconds, inclusive" })),
  type: Schema.optionalKey(Schema.Literals(ENTRY_TYPES)),
  limit: Schema.optionalKey(
    Natural.check(Schema.isBetween({ minimum: 1, maximum: 10_000 })).annotate({
      description: "1-10000, default 1000",
    }),
  ),
  starting_after: Schema.optionalKey(
    Schema.String.check(Schema.isPattern(/^\d+:\d+:\d+$/u)).annotate({
      description: "Cursor: the `cursor` of the last entry of the previous page",
    }),
  ),
  format: Schema.optionalKey(
    Schema.Literals(DOWNLOAD_FORMATS).annotate({
      description:
        "Download every entry matching the filters, streamed: csv (the columns below) or json (an array of entries). Not with limit or starting_after",
    }),
  ),
}).annotate({ identifier: "ReconciliationQuery" });
export type ReconciliationQuery = typeof ReconciliationQuery.Type;

export const ReconciliationEntry = Schema.Struct({
  type: Schema.Literals(ENTRY_TYPES).annotate({
    description:
      "charge, release, return: of a mandate's charge; payment: a deposit address swept (to you, or into the hold); payment_release, payment_return: the end of a payment's hold",
  }),
  chain: Schema.Int,
  block_number: Schema.Int,
  block_hash: Schema.String,
  timestamp: Schema.Int,
  transaction_hash: Schema.String,
  log_index: Schema.Int,
  mandate: Schema.NullOr(Schema.String).annotate({ description: "The escrow's mandate id (charges)" }),
  charge_id: Schema.NullOr(Schema.String),
  period: Schema.NullOr(Schema.Int),
  payment_id: Schema.NullOr(Schema.String).annotate({ description: "The escrow's payment id (payments)" }),
  deposit_address: Schema.NullOr(Schema.String),
  token: Schema.NullOr(Schema.String),
  token_address: Schema.String,
  amount: Schema.String.annotate({ description: "Token base units" }),
  amount_decimal: Schema.NullOr(Schema.String),
  customer_address: Schema.NullOr(Schema.String).annotate({
    description: "The mandate's customer; for a payment's return, where the funds went",
  }),
  payee_address: Schema.String,
  confirmations: Schema.Int,
  livemode: Schema.Boolean,
  cursor: Schema.String,
}).annotate({ identifier: "ReconciliationEntry" });
export type ReconciliationEntry = typeof ReconciliationEntry.Type;

export const ReconciliationPage = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(ReconciliationEntry),
  has_more: Schema.Boolean,
}).annotate({ identifier: "ReconciliationList" });
export type ReconciliationPage = typeof ReconciliationPage.Type;

const decodeEntries = decodeRows(FactRow);
const decodePayouts = decodeRows(Schema.Struct({ chain_id: Schema.Number, payout: Schema.String }));
const decodeCursors = decodeRows(
  Schema.Struct({
    chain_id: Schema.Number,
    block_number: Schema.String,
    log_index: Schema.Number,
    fact_key: Schema.String,
  }),
);

const TYPE_OF_KIND = {
  "charge.succeeded": "charge",
  "charge.released": "release",
  "charge.returned": "return",
  "payment.received": "payment",
  "payment.released": "payment_release",
  "payment.returned": "payment_return",
} as const;
const KIND_OF_TYPE = {
  charge: "charge.succeeded",
  release: "charge.released",
  return: "charge.returned",
  payment: "payment.received",
  payment_release: "payment.released",
  payment_return: "payment.returned",
} as const;

export const CSV_COLUMNS = [
  "type",
  "chain",
  "block_number",
  "block_hash",
  "timestamp",
  "transaction_hash",
  "log_index",
  "mandate",
  "charge_id",
  "period",
  "token",
  "token_address",
  "amount",
  "amount_decimal",
  "customer_address",
  "payee_address",
  "confirmations",
  "livemode",
  // Added with payments: at the end, so readers of the earlier columns by position keep working.
  "payment_id",
  "deposit_address",
] as const;

const csvOf = (entry: ReconciliationEntry) => CSV_COLUMNS.map((column) => entry[column] ?? null);

export class Reconciliation extends Context.Service<
  Reconciliation,
  {
    readonly list: (
      scope: MerchantScope,
      query: ReconciliationQuery,
    ) => Effect.Effect<ReconciliationPage, InvalidRequest | SqlError.SqlError>;
    /** Every entry matching the query as CSV or JSON (`format`), streamed: a download. */
    readonly download: (
      scope: MerchantScope,
      query: ReconciliationQuery,
    ) => Effect.Effect<Download<never> | undefined, InvalidRequest>;
  }
>()("Reconciliation") {
  static readonly layer = Layer.effect(
    Reconciliation,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const registry = yield* ChainRegistry;

      const list = (scope: MerchantScope, query: ReconciliationQuery) =>
        Effect.gen(function* () {
          const chains = registry
            .forMode(scope.livemode)
            .filter((c) => query.chain === undefined || c.id === query.chain);
          if (query.chain !== undefined && chains.length === 0)
            return yield* invalidParam(
              "chain",
              `No such ${scope.livemode ? "live" : "test"} chain: ${query.chain}`,
              "chain_unknown",
            );
          if (chains.length === 0) return { object: "list" as const, data: [], has_more: false };
          const limit = query.limit ?? 1000;
          const [afterChain, afterBlock, afterLog] = (query.starting_after ?? "-1:-1:-1")
            .split(":")
            .map(Number);
          const kinds = query.type ? [KIND_OF_TYPE[query.type]] : Object.keys(TYPE_OF_KIND);
          // The merchant's payout addresses per chain (former ones too: their facts stay the merchant's),
          // but not one whose history the relay is still backfilling: those facts are not decided yet.
          const payouts = yield* sql`
            SELECT DISTINCT mc.chain_id::int AS chain_id, lower(mc.payout_address) AS payout
            FROM billing.merchant_chains mc
            WHERE mc.merchant_id = ${scope.merchantId} AND mc.chain_id IN ${sql.in(chains.map((c) => c.id))}
              AND NOT EXISTS (SELECT 1 FROM billing.fact_relay_backfills b
                WHERE b.chain_id = mc.chain_id AND b.payee = lower(mc.payout_address) AND b.done_at IS NULL)`.pipe(
            Effect.flatMap(decodePayouts),
          );
          // How far the relay has read each chain: facts after it are not confirmed or not decided yet.
          const cursors = yield* sql`
            SELECT chain_id::int AS chain_id, block_number::text AS block_number, log_index, fact_key
            FROM billing.fact_relay_cursors
            WHERE chain_id IN ${sql.in(chains.map((c) => c.id))} AND fact_key IS NOT NULL`.pipe(
            Effect.flatMap(decodeCursors),
          );
          const ownFacts = cursors.flatMap((cursor) => {
            const payees = payouts.filter((p) => p.chain_id === cursor.chain_id).map((p) => p.payout);
            return payees.length === 0
              ? []
              : [
                  sql`(f.chain_id = ${cursor.chain_id} AND f.payee IN ${sql.in(payees)}
                    AND (f.block_number, f.log_index, f.key) <= (${cursor.block_number}::numeric,
                      ${cursor.log_index}::int, ${cursor.fact_key}::text))`,
                ];
          });
          if (ownFacts.length === 0) return { object: "list" as const, data: [], has_more: false };
          // One Ponder relation per statement (see chains/onchain.ts): facts here, heads below.
          const rows = yield* sql`
            SELECT f.kind, f.chain_id, f.block_number::text, f.block_hash, f.timestamp::text, f.tx_hash, f.log_index,
                   f.key, f.mandate_id, f.charge_id, f.payment_id, f.amount::text, f.details, f.customer, f.payee,
                   f.token
            FROM ${sql(ONCHAIN_SCHEMA)}.fact f
            WHERE f.kind IN ${sql.in(kinds)}
              AND ${sql.or(ownFacts)}
              AND NOT EXISTS (SELECT 1 FROM billing.skipped_facts s WHERE s.fact_key = f.key)
              AND f.block_number >= ${query.from_block ?? 0}
              AND f.block_number <= ${query.to_block ?? Number.MAX_SAFE_INTEGER}
              AND f.timestamp >= ${query.from ?? 0}
              AND f.timestamp <= ${query.to ?? Number.MAX_SAFE_INTEGER}
              AND (f.chain_id, f.block_number, f.log_index) > (${afterChain ?? -1}, ${afterBlock ?? -1}, ${afterLog ?? -1})
            ORDER BY f.chain_id, f.block_number, f.log_index
            LIMIT ${limit + 1}`.pipe(Effect.flatMap(decodeEntries));
          const heads = yield* chainHeads.pipe(Effect.provideService(SqlClient.SqlClient, sql));
          const data = rows.slice(0, limit).flatMap((row): ReconciliationEntry[] => {
            const type = TYPE_OF_KIND[row.kind as keyof typeof TYPE_OF_KIND];
            if (type === undefined || row.amount === null) return [];
            const isPayment = row.payment_id !== null;
            const chain = chains.find((c) => c.id === row.chain_id);
            const token = chain?.tokens.find((t) => t.address.toLowerCase() === row.token);
            const entry: ReconciliationEntry = {
              type,
              chain: row.chain_id,
              block_number: Number(row.block_number),
              block_hash: row.block_hash,
              timestamp: Number(row.timestamp),
              transaction_hash: row.tx_hash,
              log_index: row.log_index,
              mandate: row.mandate_id,
              charge_id: row.charge_id,
              period: isPayment ? null : Number(row.details.period),
              payment_id: row.payment_id,
              deposit_address: isPayment ? String(row.details.deposit_address) : null,
              token: token?.symbol ?? null,
              token_address: row.token,
              amount: row.amount,
              amount_decimal: token ? formatUnits(BigInt(row.amount), token.decimals) : null,
              customer_address: isPayment
                ? row.details.to === undefined
                  ? null
                  : String(row.details.to)
                : row.customer,
              payee_address: row.payee,
              confirmations: Math.max(0, Number((heads.get(row.chain_id) ?? 0n) - BigInt(row.block_number))),
              livemode: scope.livemode,
              cursor: `${row.chain_id}:${row.block_number}:${row.log_index}`,
            };
            return [entry];
          });
          return { object: "list" as const, data, has_more: rows.length > limit };
        });

      const download = (scope: MerchantScope, query: ReconciliationQuery) =>
        Effect.gen(function* () {
          if (query.format === undefined) return undefined;
          if (query.limit !== undefined || query.starting_after !== undefined)
            return yield* invalidParam(
              query.limit !== undefined ? "limit" : "starting_after",
              "A download (`format`) has every entry matching the filters: leave out limit and starting_after.",
              "parameter_conflict",
            );
          return pagedDownload({
            format: query.format,
            name: "reconciliation",
            columns: CSV_COLUMNS,
            csv: csvOf,
            json: (entry: ReconciliationEntry) => entry,
            page: (after: string | undefined) =>
              Effect.map(
                list(scope, {
                  ...query,
                  limit: DOWNLOAD_PAGE,
                  ...(after === undefined ? {} : { starting_after: after }),
                }),
                (page) => ({
                  rows: page.data,
                  after: page.data.at(-1)?.cursor ?? after,
                  more: page.has_more,
                }),
              ),
          });
        });

      return { list, download };
    }),
  );
}
