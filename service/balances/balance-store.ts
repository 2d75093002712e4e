/**
 * The merchant's ledger: the one writer of `billing.balance_transactions`, `billing.ledger_entries` and
 * `billing.ledger_backfills` (migration 0040).
 *
 * - The fact relay records the money movement of every confirmed chain fact it applies, in the
 *   transaction that applies it (`record`): a movement is in the ledger exactly when the fact's effect
 *   on the merchant's objects is. Declined facts (a planted deposit, a charge of an unknown mandate)
 *   never enter it. A fact's movement is recorded once: the standing row of its key is unique.
 * - A reorganisation deeper than the confirmations takes a movement back with a reversal (`reverse`),
 *   a new row whose legs negate the original's; nothing is deleted, and the original row never changes
 *   but for its `standing` flag. A fact mined again elsewhere is then recorded again at its new place.
 * - Merchants read their balance transactions and balances, per chain and token (sums of entries).
 *   The ledger only grows, so an export of a closed range is the same every time.
 */
import { Array as Arr, Context, Effect, Layer, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import {
  type Fragment,
  fixed,
  type Page,
  type PageOrder,
  pageRows,
  relation,
  selectRows,
} from "../db/query.ts";
import { decodeRows, firstOr } from "../db/rows.ts";
import { DOWNLOAD_PAGE, type Download, isoSeconds, pagedDownload } from "../downloads.ts";
import { type InvalidRequest, invalidParam, type NotFound, resourceMissing } from "../errors.ts";
import { freshId, ID_PREFIXES } from "../ids.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { formatDecimal } from "../money/decimal.ts";
import {
  BALANCE_EFFECTS,
  type BalanceAmount,
  type BalanceObject,
  type BalanceTransactionObject,
  type ListBalanceTransactionsQuery,
} from "./balance-transaction-object.ts";
import { ACCOUNTS, MOVEMENT_TYPES, type Movement, movementOf, reversalOf } from "./movements.ts";

export const MONEY_FACT_KINDS = [
  "charge.succeeded",
  "charge.released",
  "charge.returned",
  "payment.received",
  "payment.released",
  "payment.returned",
] as const;
export type MoneyFactKind = (typeof MONEY_FACT_KINDS)[number];

/** A confirmed chain fact that moves money, as the relay applied it. */
export interface LedgerFact {
  readonly key: string;
  readonly kind: MoneyFactKind;
  readonly blockNumber: string;
  readonly blockHash: string;
  readonly txHash: string;
  readonly logIndex: number;
  /** Block time, unix seconds. */
  readonly timestamp: number;
  readonly amount: string;
  readonly token: string;
  /** The end of the hold the money went into or came out of; 0: none (straight to the payee). */
  readonly releaseAt: number;
  /** charge.*: the escrow's charge id; payment.*: null. */
  readonly chargeOnchainId: string | null;
  /** payment.*: the deposit address; charge.*: null. */
  readonly depositAddress: string | null;
}

const movementOfFact = (fact: LedgerFact): Movement => {
  const amount = BigInt(fact.amount);
  return fact.kind === "charge.succeeded" || fact.kind === "payment.received"
    ? movementOf({ kind: fact.kind, amount, held: fact.releaseAt > 0 })
    : movementOf({ kind: fact.kind, amount });
};

const availableOn = (fact: LedgerFact) =>
  (fact.kind === "charge.succeeded" || fact.kind === "payment.received") && fact.releaseAt > 0
    ? fact.releaseAt
    : fact.timestamp;

const TransactionRow = Schema.Struct({
  id: Schema.String,
  seq: Schema.Number,
  merchant_id: Schema.String,
  livemode: Schema.Boolean,
  chain_id: Schema.Number,
  token_address: Schema.String,
  currency: Schema.String,
  decimals: Schema.Number,
  type: Schema.Literals(MOVEMENT_TYPES),
  balance_effect: Schema.Literals(BALANCE_EFFECTS),
  amount: Schema.String,
  source_id: Schema.NullOr(Schema.String),
  invoice_id: Schema.NullOr(Schema.String),
  fact_key: Schema.String,
  block_number: Schema.Number,
  block_hash: Schema.String,
  tx_hash: Schema.String,
  log_index: Schema.Number,
  created: Schema.Number,
  available_on: Schema.Number,
  reverses: Schema.NullOr(Schema.String),
  gas: Schema.NullOr(Schema.Struct({ amount_wei: Schema.String, currency: Schema.String })),
  /** False once a reversal took the movement back (never rendered: the row as the API shows it is fixed). */
  standing: Schema.Boolean,
  entries: Schema.Array(Schema.Struct({ account: Schema.Literals(ACCOUNTS), amount: Schema.String })),
});
type TransactionRow = typeof TransactionRow.Type;

const TRANSACTIONS = relation({
  from: "billing.balance_transactions t",
  alias: "t",
  columns: `t.id, t.seq::float8 AS seq, t.merchant_id, t.livemode, t.chain_id::float8 AS chain_id, t.token_address, t.currency,
    t.decimals, t.type, t.balance_effect, t.amount::text AS amount, t.source_id, t.invoice_id, t.fact_key,
    t.block_number::float8 AS block_number, t.block_hash, t.tx_hash, t.log_index, t.created::float8 AS created,
    t.available_on::float8 AS available_on, t.reverses, t.standing,
    CASE WHEN t.reverses IS NULL THEN (SELECT json_build_object('amount_wei', sum(g.amount_wei)::text,
        'currency', min(c.native_currency))
      FROM billing.gas_cost_shares g JOIN billing.gas_costs c ON c.relayer_transaction_id = g.relayer_transaction_id
      WHERE g.object_id = t.source_id AND c.transaction_hash = t.tx_hash HAVING count(*) > 0) END AS gas,
    (SELECT json_agg(json_build_object('account', e.account, 'amount', e.amount::text) ORDER BY e.amount, e.account)
      FROM billing.ledger_entries e WHERE e.balance_transaction_id = t.id) AS entries`,
  row: TransactionRow,
});

const renderTransaction = (row: TransactionRow): BalanceTransactionObject => ({
  id: row.id,
  object: "balance_transaction",
  livemode: row.livemode,
  type: row.type,
  amount: row.amount,
  amount_decimal: formatDecimal(BigInt(row.amount), row.decimals),
  balance_effect: row.balance_effect,
  entries: row.entries,
  reverses: row.reverses,
  source: row.source_id,
  invoice: row.invoice_id,
  chain: row.chain_id,
  currency: row.currency,
  token_address: row.token_address,
  gas: row.gas,
  block: { number: row.block_number, hash: row.block_hash },
  transaction_hash: row.tx_hash,
  log_index: row.log_index,
  created: row.created,
  available_on: row.available_on,
});

const decodeSources = decodeRows(
  Schema.Struct({ handle: Schema.String, id: Schema.String, invoice_id: Schema.NullOr(Schema.String) }),
);
const decodeIds = decodeRows(Schema.Struct({ id: Schema.String }));
const decodeBlocks = decodeRows(
  Schema.Struct({ block_number: Schema.String, block_hash: Schema.String, fact_key: Schema.String }),
);
const decodeTotals = decodeRows(
  Schema.Struct({
    chain_id: Schema.Number,
    token_address: Schema.String,
    currency: Schema.String,
    decimals: Schema.Number,
    account: Schema.Literals(ACCOUNTS),
    amount: Schema.String,
  }),
);
const PeriodTotalsRow = Schema.Struct({
  chain_id: Schema.Number,
  token_address: Schema.String,
  currency: Schema.String,
  decimals: Schema.Number,
  opening_pending: Schema.String,
  closing_pending: Schema.String,
  charges_held: Schema.String,
  charges_unheld: Schema.String,
  payments_held: Schema.String,
  payments_unheld: Schema.String,
  released: Schema.String,
  returned: Schema.String,
  available_in: Schema.String,
  gas_wei: Schema.String,
  gas_currency: Schema.NullOr(Schema.String),
  first_block: Schema.NullOr(Schema.Number),
  last_block: Schema.NullOr(Schema.Number),
});

const decodePeriod = decodeRows(PeriodTotalsRow);
const decodeBackfill = decodeRows(
  Schema.Struct({
    block_number: Schema.NullOr(Schema.String),
    log_index: Schema.NullOr(Schema.Number),
    fact_key: Schema.NullOr(Schema.String),
    done: Schema.Boolean,
  }),
);

/** Where a chain's replay of relayed facts into the ledger stands. */
export interface LedgerBackfill {
  readonly done: boolean;
  readonly position: { readonly block: string; readonly logIndex: number; readonly key: string } | null;
}

/** The gas shares of the relayer transaction that moved `t`'s money (its object's share). */
const GAS_OF_MOVEMENT = fixed(`billing.gas_cost_shares g
  JOIN billing.gas_costs c ON c.relayer_transaction_id = g.relayer_transaction_id
  WHERE g.object_id = t.source_id AND c.transaction_hash = t.tx_hash`);

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const sumOf = (condition: Fragment) => sql`coalesce(sum(e.amount) FILTER (WHERE ${condition}), 0)::text`;
  const inScope = (scope: MerchantScope) => [
    sql`t.merchant_id = ${scope.merchantId}`,
    sql`t.livemode = ${scope.livemode}`,
  ];

  /** The API objects that moved the money: charges by escrow id, payments by deposit address. */
  const sourcesOf = (chainId: number, facts: ReadonlyArray<LedgerFact>) =>
    Effect.gen(function* () {
      const charges = [
        ...new Set(facts.flatMap((f) => (f.chargeOnchainId === null ? [] : [f.chargeOnchainId]))),
      ];
      const deposits = [
        ...new Set(facts.flatMap((f) => (f.depositAddress === null ? [] : [f.depositAddress.toLowerCase()]))),
      ];
      const found = new Map<string, { readonly id: string; readonly invoice_id: string | null }>();
      if (charges.length > 0)
        for (const row of yield* sql`SELECT c.onchain_id AS handle, c.id,
              (SELECT i.id FROM billing.invoices i WHERE i.charge_id = c.id ORDER BY i.id LIMIT 1) AS invoice_id
            FROM billing.charges c
            WHERE c.chain_id = ${chainId} AND c.onchain_id = ANY (${charges}::text[])`.pipe(
          Effect.flatMap(decodeSources),
        ))
          found.set(`charge:${row.handle}`, row);
      if (deposits.length > 0)
        for (const row of yield* sql`SELECT p.deposit_address AS handle, p.id, NULL::text AS invoice_id
            FROM billing.payments p
            WHERE p.chain_id = ${chainId} AND p.deposit_address = ANY (${deposits}::text[])`.pipe(
          Effect.flatMap(decodeSources),
        ))
          found.set(`payment:${row.handle}`, row);
      return (fact: LedgerFact) =>
        fact.chargeOnchainId !== null
          ? found.get(`charge:${fact.chargeOnchainId}`)
          : found.get(`payment:${fact.depositAddress?.toLowerCase()}`);
    });

  const insertEntries = (rows: ReadonlyArray<{ readonly id: string; readonly movement: Movement }>) =>
    !Arr.isReadonlyArrayNonEmpty(rows)
      ? Effect.void
      : Effect.asVoid(
          sql`INSERT INTO billing.ledger_entries ${sql.insert(
            Arr.flatMap(rows, ({ id, movement }) =>
              Arr.map(movement.legs, (leg) => ({
                balance_transaction_id: id,
                account: leg.account,
                amount: leg.amount.toString(),
              })),
            ),
          )}`,
        );

  /**
   * Records the movements of `facts`, a merchant's on one chain, applied by the relay in this
   * transaction; a fact whose movement stands already is passed. Returns how many were recorded.
   */
  const record = (
    owner: { readonly merchantId: string; readonly chain: ResolvedChain },
    facts: ReadonlyArray<LedgerFact>,
  ): Effect.Effect<number, SqlError.SqlError> =>
    Effect.gen(function* () {
      if (!Arr.isReadonlyArrayNonEmpty(facts)) return 0;
      const { chain } = owner;
      const sourceOf = yield* sourcesOf(chain.id, facts);
      const planned = Arr.map(facts, (fact) => {
        const movement = movementOfFact(fact);
        const source = sourceOf(fact);
        const token = tokenOf(chain, fact.token);
        return {
          movement,
          row: {
            id: freshId(ID_PREFIXES.balanceTransaction, fact.timestamp * 1000),
            merchant_id: owner.merchantId,
            livemode: chain.livemode,
            chain_id: chain.id,
            token_address: fact.token.toLowerCase(),
            currency: token?.symbol ?? fact.token.toLowerCase(),
            decimals: token?.decimals ?? 0,
            type: movement.type,
            balance_effect: movement.balanceEffect,
            amount: movement.amount.toString(),
            source_id: source?.id ?? null,
            invoice_id: source?.invoice_id ?? null,
            fact_key: fact.key,
            block_number: fact.blockNumber,
            block_hash: fact.blockHash,
            tx_hash: fact.txHash,
            log_index: fact.logIndex,
            created: fact.timestamp,
            available_on: availableOn(fact),
          },
        };
      });
      const inserted =
        yield* sql`INSERT INTO billing.balance_transactions ${sql.insert(Arr.map(planned, (p) => p.row))}
          ON CONFLICT (fact_key) WHERE standing AND reverses IS NULL DO NOTHING RETURNING id`.pipe(
          Effect.flatMap(decodeIds),
        );
      const ids = new Set(inserted.map((row) => row.id));
      yield* insertEntries(
        planned.filter((p) => ids.has(p.row.id)).map((p) => ({ id: p.row.id, movement: p.movement })),
      );
      return ids.size;
    });

  const inWindow = (chainId: number, from: bigint, through: bigint) => [
    sql`t.chain_id = ${chainId}`,
    sql`t.reverses IS NULL`,
    sql`t.block_number BETWEEN ${from.toString()}::bigint AND ${through.toString()}::bigint`,
  ];

  /**
   * One standing movement per block of the chain in blocks `from`..`through`: if its fact still has
   * that block's hash, the block was not reorganised and none of its movements needs a closer look.
   */
  const blocksOf = (chainId: number, from: bigint, through: bigint) =>
    sql`SELECT DISTINCT ON (t.block_number) t.block_number::text AS block_number, t.block_hash, t.fact_key
      FROM billing.balance_transactions t
      WHERE ${sql.and([...inWindow(chainId, from, through), sql`t.standing`])}
      ORDER BY t.block_number, t.seq`.pipe(Effect.flatMap(decodeBlocks));

  /**
   * The chain's standing movements (not reversals) in `blocks`, and those reversed in blocks
   * `from`..`through` whose fact has no standing movement now (a reorg's check looks for them coming back).
   */
  const recentOf = (chainId: number, from: bigint, through: bigint, blocks: ReadonlyArray<string>) =>
    selectRows(
      sql,
      TRANSACTIONS,
      [
        ...inWindow(chainId, from, through),
        sql`((t.standing AND t.block_number = ANY (${blocks}::bigint[])) OR (NOT t.standing AND NOT EXISTS (
          SELECT 1 FROM billing.balance_transactions s
          WHERE s.fact_key = t.fact_key AND s.standing AND s.reverses IS NULL)))`,
      ],
      { order: sql`t.block_number, t.log_index, t.seq` },
    );

  /**
   * Takes standing movements back (a reorg removed or moved their facts): each gets a reversal at
   * `at` (the chain's time when it was seen), and stops standing. One not standing any more is passed.
   * Returns the reversals' ids.
   */
  const reverse = (ids: ReadonlyArray<string>, at: number) =>
    Effect.gen(function* () {
      if (ids.length === 0) return [] as string[];
      const originals = yield* selectRows(
        sql,
        TRANSACTIONS,
        [sql`t.id = ANY (${ids}::text[])`, sql`t.standing`, sql`t.reverses IS NULL`],
        { order: sql`t.id`, lock: "update" },
      );
      if (!Arr.isReadonlyArrayNonEmpty(originals)) return [] as string[];
      yield* sql`UPDATE billing.balance_transactions SET standing = false
        WHERE id = ANY (${originals.map((row) => row.id)}::text[])`;
      const planned = yield* Effect.forEach(originals, (row) =>
        Effect.map(recordedMovement(row), (recorded) => {
          const movement = reversalOf(recorded);
          return {
            movement,
            row: {
              id: freshId(ID_PREFIXES.balanceTransaction, at * 1000),
              merchant_id: row.merchant_id,
              livemode: row.livemode,
              chain_id: row.chain_id,
              token_address: row.token_address,
              currency: row.currency,
              decimals: row.decimals,
              type: row.type,
              balance_effect: row.balance_effect,
              amount: movement.amount.toString(),
              source_id: row.source_id,
              invoice_id: row.invoice_id,
              fact_key: row.fact_key,
              block_number: row.block_number,
              block_hash: row.block_hash,
              tx_hash: row.tx_hash,
              log_index: row.log_index,
              created: at,
              available_on: at,
              reverses: row.id,
            },
          };
        }),
      );
      if (!Arr.isReadonlyArrayNonEmpty(planned)) return [] as string[];
      yield* sql`INSERT INTO billing.balance_transactions ${sql.insert(Arr.map(planned, (p) => p.row))}`;
      yield* insertEntries(planned.map((p) => ({ id: p.row.id, movement: p.movement })));
      return planned.map((p) => p.row.id);
    });

  const order = (scope: MerchantScope): PageOrder => ({
    key: sql`(t.created, t.seq)`,
    newestFirst: sql`t.created DESC, t.seq DESC`,
    oldestFirst: sql`t.created ASC, t.seq ASC`,
    cursorKey: (_, id) =>
      sql`(SELECT created, seq FROM billing.balance_transactions
        WHERE id = ${id} AND merchant_id = ${scope.merchantId})`,
  });

  const checkRanges = (query: ListBalanceTransactionsQuery) =>
    query.created_from !== undefined &&
    query.created_to !== undefined &&
    query.created_to < query.created_from
      ? Effect.fail(invalidParam("created_to", "`created_to` must not be earlier than `created_from`."))
      : query.available_on_from !== undefined &&
          query.available_on_to !== undefined &&
          query.available_on_to < query.available_on_from
        ? Effect.fail(
            invalidParam(
              "available_on_to",
              "`available_on_to` must not be earlier than `available_on_from`.",
            ),
          )
        : Effect.void;

  const filtersOf = (scope: MerchantScope, query: ListBalanceTransactionsQuery) => [
    ...inScope(scope),
    ...(query.type !== undefined ? [sql`t.type = ${query.type}`] : []),
    ...(query.source !== undefined ? [sql`t.source_id = ${query.source}`] : []),
    ...(query.chain !== undefined ? [sql`t.chain_id = ${query.chain}`] : []),
    ...(query.token !== undefined ? [sql`t.token_address = ${query.token.toLowerCase()}`] : []),
    ...(query.created_from !== undefined ? [sql`t.created >= ${query.created_from}`] : []),
    ...(query.created_to !== undefined ? [sql`t.created < ${query.created_to}`] : []),
    ...(query.available_on_from !== undefined ? [sql`t.available_on >= ${query.available_on_from}`] : []),
    ...(query.available_on_to !== undefined ? [sql`t.available_on < ${query.available_on_to}`] : []),
  ];

  const list = (
    scope: MerchantScope,
    query: ListBalanceTransactionsQuery,
  ): Effect.Effect<Page<BalanceTransactionObject>, InvalidRequest | SqlError.SqlError> =>
    Effect.gen(function* () {
      yield* checkRanges(query);
      const page = yield* pageRows(sql, TRANSACTIONS, filtersOf(scope, query), query, order(scope));
      return { ...page, data: page.data.map(renderTransaction) };
    });

  /** Every balance transaction matching the query, oldest first, as CSV or JSON (`format`): a download. */
  const download = (
    scope: MerchantScope,
    query: ListBalanceTransactionsQuery,
  ): Effect.Effect<Download<never> | undefined, InvalidRequest> =>
    Effect.gen(function* () {
      if (query.format === undefined) return undefined;
      yield* checkRanges(query);
      if (
        query.limit !== undefined ||
        query.starting_after !== undefined ||
        query.ending_before !== undefined
      )
        return yield* invalidParam(
          query.limit !== undefined
            ? "limit"
            : query.starting_after !== undefined
              ? "starting_after"
              : "ending_before",
          "A download (`format`) has every balance transaction matching the filters, oldest first: leave out limit, starting_after and ending_before.",
          "parameter_conflict",
        );
      const where = filtersOf(scope, query);
      return pagedDownload({
        format: query.format,
        name: "balance_transactions",
        columns: BALANCE_TRANSACTION_COLUMNS,
        csv: csvOf,
        json: renderTransaction,
        page: (after: { readonly created: number; readonly seq: number } | undefined) =>
          Effect.map(
            selectRows(
              sql,
              TRANSACTIONS,
              after === undefined
                ? where
                : [...where, sql`(t.created, t.seq) > (${after.created}, ${after.seq})`],
              { order: sql`t.created ASC, t.seq ASC`, limit: DOWNLOAD_PAGE },
            ),
            (rows) => {
              const last = rows.at(-1);
              return {
                rows,
                after: last === undefined ? after : { created: last.created, seq: last.seq },
                more: rows.length === DOWNLOAD_PAGE,
              };
            },
          ),
      });
    });

  const retrieve = (
    scope: MerchantScope,
    id: string,
  ): Effect.Effect<BalanceTransactionObject, NotFound | SqlError.SqlError> =>
    selectRows(sql, TRANSACTIONS, [sql`t.id = ${id}`, ...inScope(scope)]).pipe(
      Effect.flatMap(firstOr(() => resourceMissing("balance transaction", id))),
      Effect.map(renderTransaction),
    );

  /** The merchant's accounts per chain and token: each the sum of its entries. */
  const balance = (scope: MerchantScope): Effect.Effect<BalanceObject, SqlError.SqlError> =>
    Effect.gen(function* () {
      const rows =
        yield* sql`SELECT t.chain_id::float8 AS chain_id, t.token_address, min(t.currency) AS currency,
            min(t.decimals) AS decimals, e.account, sum(e.amount)::text AS amount
          FROM billing.balance_transactions t
          JOIN billing.ledger_entries e ON e.balance_transaction_id = t.id
          WHERE ${sql.and(inScope(scope))} AND e.account <> 'customer'
          GROUP BY t.chain_id, t.token_address, e.account
          ORDER BY t.chain_id, t.token_address`.pipe(Effect.flatMap(decodeTotals));
      const amounts = new Map<string, { -readonly [K in keyof BalanceAmount]: BalanceAmount[K] }>();
      for (const row of rows) {
        const key = `${row.chain_id}:${row.token_address}`;
        const amount = amounts.get(key) ?? {
          chain: row.chain_id,
          currency: row.currency,
          token_address: row.token_address,
          pending: "0",
          pending_decimal: "0",
          available: "0",
          available_decimal: "0",
          returned: "0",
          returned_decimal: "0",
        };
        if (row.account !== "customer") {
          amount[row.account] = row.amount;
          amount[`${row.account}_decimal`] = formatDecimal(BigInt(row.amount), row.decimals);
        }
        amounts.set(key, amount);
      }
      return { object: "balance", livemode: scope.livemode, amounts: [...amounts.values()] };
    });

  /**
   * The merchant's money over `from`..`to` (unix seconds of `created`, to exclusive) per chain and
   * token: pending at both ends, and every flow between them by what moved it (each the sum of one
   * account's entries, reversals included), with the first and last block of the period's movements.
   */
  const periodTotals = (scope: MerchantScope, from: number, to: number) =>
    sql`SELECT t.chain_id::float8 AS chain_id, t.token_address, min(t.currency) AS currency,
          min(t.decimals) AS decimals,
          ${sumOf(sql`e.account = 'pending' AND t.created < ${from}`)} AS opening_pending,
          ${sumOf(sql`e.account = 'pending'`)} AS closing_pending,
          ${sumOf(sql`t.created >= ${from} AND t.type = 'charge' AND e.account = 'pending'`)} AS charges_held,
          ${sumOf(sql`t.created >= ${from} AND t.type = 'charge' AND e.account = 'available'`)} AS charges_unheld,
          ${sumOf(sql`t.created >= ${from} AND t.type = 'payment' AND e.account = 'pending'`)} AS payments_held,
          ${sumOf(sql`t.created >= ${from} AND t.type = 'payment' AND e.account = 'available'`)} AS payments_unheld,
          ${sumOf(sql`t.created >= ${from} AND t.type IN ('release', 'payment_release') AND e.account = 'available'`)} AS released,
          ${sumOf(sql`t.created >= ${from} AND t.type IN ('return', 'payment_return') AND e.account = 'returned'`)} AS returned,
          ${sumOf(sql`t.created >= ${from} AND e.account = 'available'`)} AS available_in,
          coalesce(sum((SELECT sum(g.amount_wei) FROM ${GAS_OF_MOVEMENT}))
            FILTER (WHERE t.created >= ${from} AND e.amount > 0 AND t.reverses IS NULL), 0)::text AS gas_wei,
          max((SELECT min(c.native_currency) FROM ${GAS_OF_MOVEMENT})) AS gas_currency,
          (min(t.block_number) FILTER (WHERE t.created >= ${from}))::float8 AS first_block,
          (max(t.block_number) FILTER (WHERE t.created >= ${from}))::float8 AS last_block
        FROM billing.balance_transactions t
        JOIN billing.ledger_entries e ON e.balance_transaction_id = t.id
        WHERE ${sql.and(inScope(scope))} AND t.created < ${to}
        GROUP BY t.chain_id, t.token_address
        ORDER BY t.chain_id, t.token_address`.pipe(Effect.flatMap(decodePeriod));

  const backfillOf = (chainId: number): Effect.Effect<LedgerBackfill, SqlError.SqlError> =>
    Effect.map(
      sql`SELECT block_number::text AS block_number, log_index, fact_key, done_at IS NOT NULL AS done
        FROM billing.ledger_backfills WHERE chain_id = ${chainId}`.pipe(Effect.flatMap(decodeBackfill)),
      ([row]) => ({
        done: row?.done ?? false,
        position:
          row?.block_number != null && row.log_index !== null && row.fact_key !== null
            ? { block: row.block_number, logIndex: row.log_index, key: row.fact_key }
            : null,
      }),
    );

  const backfillRead = (
    chainId: number,
    position: { readonly block: string; readonly logIndex: number; readonly key: string } | null,
    done: boolean,
  ) =>
    Effect.asVoid(sql`INSERT INTO billing.ledger_backfills (chain_id, block_number, log_index, fact_key, done_at)
      VALUES (${chainId}, ${position?.block ?? null}::numeric, ${position?.logIndex ?? null}::int,
        ${position?.key ?? null}::text, ${done ? sql`now()` : sql`NULL`})
      ON CONFLICT (chain_id) DO UPDATE SET block_number = EXCLUDED.block_number,
        log_index = EXCLUDED.log_index, fact_key = EXCLUDED.fact_key, done_at = EXCLUDED.done_at`);

  /** Deletes a chain's ledger (the local stack's crash recovery: the blocks it recorded are gone). */
  const forgetChain = (chainId: number) =>
    Effect.gen(function* () {
      yield* sql`DELETE FROM billing.ledger_entries e USING billing.balance_transactions t
        WHERE t.id = e.balance_transaction_id AND t.chain_id = ${chainId}`;
      yield* sql`DELETE FROM billing.balance_transactions WHERE chain_id = ${chainId}`;
      yield* sql`DELETE FROM billing.ledger_backfills WHERE chain_id = ${chainId}`;
    });

  return {
    record,
    blocksOf,
    recentOf,
    reverse,
    list,
    download,
    retrieve,
    balance,
    periodTotals,
    backfillOf,
    backfillRead,
    forgetChain,
  };
});

/** The columns of a balance transactions download (CSV), in this order for good: new ones go at the end. */
const BALANCE_TRANSACTION_COLUMNS = [
  "id",
  "type",
  "reverses",
  "amount",
  "amount_decimal",
  "balance_effect",
  "customer_change",
  "pending_change",
  "available_change",
  "returned_change",
  "currency",
  "token_address",
  "chain",
  "source",
  "invoice",
  "created",
  "created_unix",
  "available_on",
  "available_on_unix",
  "block_number",
  "block_hash",
  "transaction_hash",
  "log_index",
  "livemode",
  "gas_wei",
  "gas_currency",
] as const;

const csvOf = (row: TransactionRow) => {
  const change = (account: (typeof ACCOUNTS)[number]) =>
    row.entries.find((entry) => entry.account === account)?.amount ?? "0";
  return [
    row.id,
    row.type,
    row.reverses,
    row.amount,
    formatDecimal(BigInt(row.amount), row.decimals),
    row.balance_effect,
    change("customer"),
    change("pending"),
    change("available"),
    change("returned"),
    row.currency,
    row.token_address,
    row.chain_id,
    row.source_id,
    row.invoice_id,
    isoSeconds(row.created),
    row.created,
    isoSeconds(row.available_on),
    row.available_on,
    row.block_number,
    row.block_hash,
    row.tx_hash,
    row.log_index,
    row.livemode,
    row.gas?.amount_wei ?? null,
    row.gas?.currency ?? null,
  ];
};

/** A recorded movement as movements.ts has it: its two entries, the negative one first. */
const recordedMovement = (row: TransactionRow): Effect.Effect<Movement> => {
  const [from, to, ...more] = [...row.entries].sort((a, b) => (BigInt(a.amount) < BigInt(b.amount) ? -1 : 1));
  return from === undefined || to === undefined || more.length > 0
    ? Effect.die(new Error(`balance transaction ${row.id} has ${row.entries.length} entries, not 2`))
    : Effect.succeed({
        type: row.type,
        balanceEffect: row.balance_effect,
        amount: BigInt(row.amount),
        legs: [
          { account: from.account, amount: BigInt(from.amount) },
          { account: to.account, amount: BigInt(to.amount) },
        ],
        reversal: row.reverses !== null,
      });
};

export class BalanceStore extends Context.Service<BalanceStore>()("BalanceStore", { make }) {
  static readonly layer = Layer.effect(BalanceStore, make);
}
