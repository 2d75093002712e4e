/**
 * The one writer of `billing.relayer_transactions`: every transaction the relayer signed, with its
 * purpose (unique per chain), its action (a return, an authorization: at most one attempt live), the
 * bytes and every hash broadcast, why it is held back if it is, and what became of it. Each statement
 * that changes a transaction's cost updates the budget's totals in the same statement
 * (relayer-spending.ts). Times come from the Clock. The service also carries the relayer's locks
 * (relayer-locks.ts), nonces (relayer-nonces.ts) and budget totals, so one tag serves them all.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect";
import { SqlClient } from "effect/sql";
import type { Hex } from "viem";
import { type Fragment, relation, selectRows } from "../db/query.ts";
import { decodeRows } from "../db/rows.ts";
import { newId } from "../ids.ts";
import { relayerLocks } from "./relayer-locks.ts";
import { relayerNonces } from "./relayer-nonces.ts";
import type { MerchantWeight } from "./relayer-shares.ts";
import {
  ADD_TO_MERCHANT_TOTAL,
  ADD_TO_TOTAL,
  COST,
  MERCHANT_PARTS,
  MERCHANT_TOTALS,
  minuteOf,
  relayerSpending,
  SIGNED_AT,
} from "./relayer-spending.ts";

/** Why a pending transaction is held back (see migration 0036). */
export const HeldReason = Schema.Literals(["fee_ceiling", "replacement_limit", "budget"]);
export type HeldReason = typeof HeldReason.Type;

export const TransactionRow = Schema.Struct({
  id: Schema.String,
  chain_id: Schema.Number,
  from_address: Schema.String,
  nonce: Schema.Number,
  to_address: Schema.String,
  data: Schema.String,
  gas_limit: Schema.BigIntFromString,
  max_fee_per_gas: Schema.BigIntFromString,
  max_priority_fee_per_gas: Schema.BigIntFromString,
  hashes: Schema.Array(Schema.String),
  raw: Schema.String,
  purpose: Schema.String,
  action: Schema.NullOr(Schema.String),
  status: Schema.Literals(["pending", "mined", "reverted", "superseded"]),
  block_number: Schema.NullOr(Schema.BigIntFromString),
  last_broadcast_at: Schema.Date,
  /** Since when its cost counts in the budget: its creation, or its last replacement. */
  signed_at: Schema.Date,
  held_reason: Schema.NullOr(HeldReason),
});
export type TransactionRow = typeof TransactionRow.Type;

/**
 * The least string above every string that starts with `prefix`, in byte order (text_pattern_ops):
 * the prefix with its last code point plus one (UTF-8 keeps code point order). None for an empty
 * prefix or one ending in the last code point.
 */
export const prefixEnd = (prefix: string): string | undefined => {
  const points = Array.from(prefix);
  const last = points.pop()?.codePointAt(0);
  if (last === undefined || last === 0x10ffff) return undefined;
  // Past the surrogates, which no valid text holds.
  const next = last + 1 === 0xd800 ? 0xe000 : last + 1;
  return points.join("") + String.fromCodePoint(next);
};

const TRANSACTIONS = relation({
  from: "billing.relayer_transactions t",
  alias: "t",
  columns: `t.id, t.chain_id::int AS chain_id, t.from_address, t.nonce::int AS nonce, t.to_address, t.data,
    t.gas_limit::text, t.max_fee_per_gas::text, t.max_priority_fee_per_gas::text, t.hashes, t.raw, t.purpose,
    t.action, t.status, t.block_number::text, t.last_broadcast_at, coalesce(t.signed_at, t.created_at) AS signed_at,
    t.held_reason`,
  row: TransactionRow,
});

export interface NewTransaction {
  readonly chainId: number;
  readonly from: string;
  readonly nonce: number;
  readonly to: Hex;
  readonly data: Hex;
  readonly gasLimit: bigint;
  readonly maxFeePerGas: bigint;
  readonly maxPriorityFeePerGas: bigint;
  readonly hash: Hex;
  readonly raw: Hex;
  readonly purpose: string;
  readonly action: string | null;
  /** Recorded and not sent: the base fee is above its fee cap (relayer-fees.ts). */
  readonly heldForFees: boolean;
  /** The merchants it serves, by how many of their objects it carries (relayer-shares.ts). */
  readonly merchants: ReadonlyArray<MerchantWeight>;
}

/** An item of a transaction that carries several (see insertItems). */
export interface NewItem {
  readonly purpose: string;
  readonly action: string;
  readonly data: Hex;
}

const decodeIds = decodeRows(Schema.Struct({ id: Schema.String }));
const decodeAsked = decodeRows(Schema.Struct({ asked: Schema.Number }));
const decodeChains = decodeRows(Schema.Struct({ chain_id: Schema.Number }));
const decodeActions = decodeRows(Schema.Struct({ count: Schema.Number, oldest: Schema.NullOr(Schema.Date) }));
const decodeChanged = decodeRows(Schema.Struct({ id: Schema.String }));

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const spending = relayerSpending(sql);
  const select = (where: ReadonlyArray<Fragment>, options?: Parameters<typeof selectRows>[3]) =>
    selectRows(sql, TRANSACTIONS, where, options);
  const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis));
  const actionBelow = (end: string | undefined) => (end === undefined ? sql`true` : sql`action ~<~ ${end}`);
  /**
   * Updates a transaction and, in the same statement, its account's totals: its cost before the update
   * leaves the minute it was signed in, its cost after joins the minute it is signed in now (the same
   * minute unless the update signs it again). The CTE's `old` sees the row as it was before the update.
   */
  const updateCounted = (id: string, set: Fragment) =>
    Effect.asVoid(sql`WITH old AS (SELECT ${SIGNED_AT("r")} AS signed_at, ${COST} AS wei, r.merchant_ids,
            r.merchant_objects
          FROM billing.relayer_transactions r WHERE id = ${id}),
        new AS (UPDATE billing.relayer_transactions r SET ${set} WHERE id = ${id}
          RETURNING chain_id, from_address, ${SIGNED_AT("r")} AS signed_at, ${COST} AS wei, merchant_ids,
            merchant_objects),
        moved AS (SELECT new.chain_id, new.from_address, old.signed_at AS at, -old.wei AS wei FROM new, old
          UNION ALL SELECT new.chain_id, new.from_address, new.signed_at, new.wei FROM new),
        merchants_moved AS (
          SELECT new.chain_id, new.from_address, m.merchant_id, old.signed_at AS at, -m.part AS wei
            FROM new, old CROSS JOIN LATERAL ${MERCHANT_PARTS("old", "old.wei")}
          UNION ALL SELECT new.chain_id, new.from_address, m.merchant_id, new.signed_at, m.part
            FROM new CROSS JOIN LATERAL ${MERCHANT_PARTS("new", "new.wei")}),
        merchant_totals AS (INSERT INTO ${MERCHANT_TOTALS}
          SELECT chain_id, from_address, merchant_id, ${minuteOf("at")}, pg_backend_pid(), sum(wei)
          FROM merchants_moved GROUP BY 1, 2, 3, 4 HAVING sum(wei) <> 0
          ${ADD_TO_MERCHANT_TOTAL})
      INSERT INTO billing.relayer_spending (chain_id, from_address, minute, backend, wei)
        SELECT chain_id, from_address, ${minuteOf("at")}, pg_backend_pid(), sum(wei) FROM moved
        GROUP BY 1, 2, 3 HAVING sum(wei) <> 0
      ${ADD_TO_TOTAL}`);
  /** The same change to the items a transaction carries (they cost nothing: no total to update). */
  const updateItems = (carrierId: string, set: Fragment) =>
    Effect.asVoid(sql`UPDATE billing.relayer_transactions SET ${set} WHERE carrier_id = ${carrierId}`);
  const ofAccount = (chainId: number, from: string) => [
    sql`t.chain_id = ${chainId}`,
    sql`t.from_address = ${from}`,
  ];

  return {
    ...relayerLocks(sql),
    ...relayerNonces(sql),
    ...spending,
    byPurpose: (chainId: number, purpose: string) =>
      // Ordered by the unique key and limited, though it matches one row at most: without that, the
      // plan cached for the pool's prepared statement while the table was empty (a sequential scan)
      // stayed, 5–11 ms a lookup at 20,000 rows against 0.2 ms through the key's index.
      Effect.map(
        select([sql`t.chain_id = ${chainId}`, sql`t.purpose = ${purpose}`], {
          order: sql`t.chain_id, t.purpose`,
          limit: 1,
        }),
        (rows) => rows[0],
      ),
    /**
     * For each item, what `byPurpose` and then `latestOfAction` would find (the row with its purpose,
     * else the newest attempt of its action), in one statement for a group's items: by item index.
     */
    byPurposeOrAction: (
      chainId: number,
      items: ReadonlyArray<{ readonly purpose: string; readonly action: string }>,
    ) =>
      Effect.gen(function* () {
        if (items.length === 0) return new Map<number, TransactionRow>();
        const rows = yield* sql`SELECT k.i::int AS asked, ${TRANSACTIONS.columns}
          FROM unnest(${items.map((i) => i.purpose)}::text[], ${items.map((i) => i.action)}::text[])
            WITH ORDINALITY AS k(purpose, action, i)
          CROSS JOIN LATERAL (
            SELECT * FROM (
              (SELECT 0 AS preference, r.* FROM billing.relayer_transactions r
                WHERE r.chain_id = ${chainId} AND r.purpose = k.purpose ORDER BY r.chain_id, r.purpose LIMIT 1)
              UNION ALL
              (SELECT 1 AS preference, r.* FROM billing.relayer_transactions r
                WHERE r.chain_id = ${chainId} AND r.action = k.action ORDER BY r.created_at DESC, r.id DESC LIMIT 1)
            ) found ORDER BY preference LIMIT 1) t`;
        const [asked, found] = yield* Effect.all([decodeAsked(rows), TRANSACTIONS.decode(rows)]);
        return new Map(found.map((row, n) => [(asked[n]?.asked ?? 0) - 1, row] as const));
      }),
    /** The newest attempt of an action. */
    latestOfAction: (chainId: number, action: string) =>
      Effect.map(
        select([sql`t.chain_id = ${chainId}`, sql`t.action = ${action}`], {
          order: sql`t.created_at DESC, t.id DESC`,
          limit: 1,
        }),
        (rows) => rows[0],
      ),
    /** How many transactions of actions starting with `prefix` were sent since `since`, and the oldest's time. */
    actionsSince: (chainId: number, prefix: string, since: Date) =>
      // The range lets a cached (generic) plan use relayer_transactions_action; starts_with alone has
      // to scan every row of the chain once Postgres stops planning with the parameter's value.
      sql`SELECT count(*)::int AS count, min(created_at) AS oldest FROM billing.relayer_transactions
        WHERE chain_id = ${chainId} AND action ~>=~ ${prefix} AND ${actionBelow(prefixEnd(prefix))}
          AND starts_with(action, ${prefix}) AND created_at > ${since}`.pipe(
        Effect.flatMap(decodeActions),
        Effect.map((rows) => rows[0] ?? { count: 0, oldest: null }),
      ),
    insert: (tx: NewTransaction) =>
      Effect.gen(function* () {
        const id = yield* newId("relayerTransaction");
        const at = yield* now;
        // The row comes back through the relation's columns in the same round trip.
        const rows = yield* sql`WITH t AS (INSERT INTO billing.relayer_transactions ${sql.insert({
          id,
          chain_id: tx.chainId,
          from_address: tx.from,
          nonce: tx.nonce,
          to_address: tx.to.toLowerCase(),
          data: tx.data,
          gas_limit: tx.gasLimit.toString(),
          max_fee_per_gas: tx.maxFeePerGas.toString(),
          max_priority_fee_per_gas: tx.maxPriorityFeePerGas.toString(),
          hashes: [tx.hash],
          raw: tx.raw,
          purpose: tx.purpose,
          action: tx.action,
          status: "pending",
          created_at: at,
          last_broadcast_at: at,
          signed_at: at,
          held_reason: tx.heldForFees ? "fee_ceiling" : null,
          held_since: tx.heldForFees ? at : null,
          merchant_ids: tx.merchants.length === 0 ? null : tx.merchants.map((m) => m.merchantId),
          merchant_objects: tx.merchants.length === 0 ? null : tx.merchants.map((m) => m.objects),
        })} RETURNING *),
          cost AS (INSERT INTO billing.relayer_spending (chain_id, from_address, minute, backend, wei)
            SELECT chain_id, from_address, ${minuteOf("signed_at")}, pg_backend_pid(), ${COST} FROM t ${ADD_TO_TOTAL}),
          merchant_cost AS (INSERT INTO ${MERCHANT_TOTALS}
            SELECT t.chain_id, t.from_address, m.merchant_id, ${minuteOf("t.signed_at")}, pg_backend_pid(), m.part
            FROM t CROSS JOIN LATERAL ${MERCHANT_PARTS("t", "t.gas_limit * t.max_fee_per_gas")}
            ${ADD_TO_MERCHANT_TOTAL})
          SELECT ${TRANSACTIONS.columns} FROM t`.pipe(Effect.flatMap(TRANSACTIONS.decode));
        const [row] = rows;
        return row ?? (yield* Effect.die(new Error("relayer transaction vanished")));
      }),

    /**
     * The items a transaction carries (an authorizeMany's authorisations), each a row with its own
     * purpose, action and call (`data`), sharing the carrier's nonce and hashes. Their cost is the
     * carrier's: each counts 0 (`spent_wei`), so no total changes.
     */
    insertItems: (carrier: TransactionRow, items: ReadonlyArray<NewItem>) =>
      Effect.gen(function* () {
        const at = yield* now;
        const rows = [];
        for (const item of items)
          rows.push({
            id: yield* newId("relayerTransaction"),
            chain_id: carrier.chain_id,
            from_address: carrier.from_address,
            nonce: carrier.nonce,
            to_address: carrier.to_address,
            data: item.data,
            gas_limit: "0",
            max_fee_per_gas: carrier.max_fee_per_gas.toString(),
            max_priority_fee_per_gas: carrier.max_priority_fee_per_gas.toString(),
            hashes: [...carrier.hashes],
            raw: "0x",
            purpose: item.purpose,
            action: item.action,
            status: "pending",
            spent_wei: "0",
            carrier_id: carrier.id,
            created_at: at,
            last_broadcast_at: at,
          });
        const [first, ...rest] = rows;
        if (first === undefined) return [];
        return yield* sql`WITH t AS (INSERT INTO billing.relayer_transactions ${sql.insert([first, ...rest])}
            RETURNING *)
          SELECT ${TRANSACTIONS.columns} FROM t`.pipe(Effect.flatMap(TRANSACTIONS.decode));
      }),

    /** Chains on which the account has pending transactions. */
    chainsWithPending: (chainIds: ReadonlyArray<number>) =>
      sql`SELECT DISTINCT chain_id::int AS chain_id FROM billing.relayer_transactions
        WHERE status = 'pending' AND chain_id = ANY(${chainIds}::bigint[]) AND carrier_id IS NULL`.pipe(
        Effect.flatMap(decodeChains),
        Effect.map((rows) => rows.map((row) => row.chain_id)),
      ),
    pendingNonces: (chainId: number, from: string) =>
      select([...ofAccount(chainId, from), sql`t.status = 'pending'`, sql`t.carrier_id IS NULL`]).pipe(
        Effect.map((rows) => rows.map((row) => row.nonce)),
      ),
    /** The account's pending transactions (not the items they carry), by chain and nonce. */
    pendingIds: (chainIds: ReadonlyArray<number>) =>
      sql`SELECT id FROM billing.relayer_transactions
        WHERE status = 'pending' AND chain_id = ANY(${chainIds}::bigint[]) AND carrier_id IS NULL
        ORDER BY chain_id, from_address, nonce`.pipe(
        Effect.flatMap(decodeIds),
        Effect.map((rows) => rows.map((row) => row.id)),
      ),
    /** A pending transaction, locked; another process tracking it now makes this undefined. */
    lockPending: (id: string) =>
      Effect.map(
        select([sql`t.id = ${id}`, sql`t.status = 'pending'`], { lock: "update_skip_locked" }),
        (rows) => rows[0],
      ),
    /**
     * A receipt, and the outcome of each item the transaction carries: reverted with it, or when the
     * escrow skipped it (`skipped`: the items' actions), mined otherwise.
     */
    recordReceipt: (
      id: string,
      receipt: {
        status: "mined" | "reverted";
        blockNumber: bigint;
        hash: string;
        /** What it paid: gas used × effective price, plus the L1 data fee where the receipt has one. */
        spentWei: bigint;
        l1FeeWei: bigint | undefined;
        skipped: ReadonlyArray<string>;
      },
    ) =>
      Effect.andThen(
        updateCounted(
          id,
          sql`status = ${receipt.status}, block_number = ${receipt.blockNumber}, mined_hash = ${receipt.hash},
            spent_wei = ${receipt.spentWei.toString()}, l1_fee_wei = ${receipt.l1FeeWei?.toString() ?? null},
            held_reason = NULL, held_since = NULL`,
        ),
        updateItems(
          id,
          sql`status = CASE WHEN ${receipt.status} = 'reverted' OR action = ANY (${[...receipt.skipped]}::text[])
              THEN 'reverted' ELSE 'mined' END,
            block_number = ${receipt.blockNumber}, mined_hash = ${receipt.hash}`,
        ),
      ),
    recordSuperseded: (id: string) =>
      Effect.andThen(
        updateCounted(id, sql`status = 'superseded'`),
        updateItems(id, sql`status = 'superseded'`),
      ),
    /**
     * Holds a pending transaction back for `reason` (see HeldReason); true when that is news (it was not
     * held, or for another reason), so the caller says so once.
     */
    recordHeld: (id: string, reason: HeldReason) =>
      Effect.gen(function* () {
        const at = yield* now;
        const changed = yield* sql`UPDATE billing.relayer_transactions
          SET held_reason = ${reason}, held_since = ${at}
          WHERE id = ${id} AND held_reason IS DISTINCT FROM ${reason} RETURNING id`.pipe(
          Effect.flatMap(decodeChanged),
        );
        return changed.length > 0;
      }),
    /** Held bytes sent at last: held no more, and its age for a replacement counts from now. */
    recordSent: (id: string) =>
      Effect.gen(function* () {
        const at = yield* now;
        yield* sql`UPDATE billing.relayer_transactions
          SET held_reason = NULL, held_since = NULL, last_broadcast_at = ${at}
          WHERE id = ${id} OR carrier_id = ${id}`;
      }),
    /**
     * The same nonce signed again with higher fees; every hash broadcast is kept (by its items too). Its
     * cost moves to this minute of the budget.
     */
    recordReplacement: (
      id: string,
      replacement: { raw: Hex; hash: Hex; maxFeePerGas: bigint; maxPriorityFeePerGas: bigint },
    ) =>
      Effect.gen(function* () {
        const at = yield* now;
        yield* updateCounted(
          id,
          sql`raw = ${replacement.raw}, hashes = array_append(hashes, ${replacement.hash}),
            max_fee_per_gas = ${replacement.maxFeePerGas.toString()},
            max_priority_fee_per_gas = ${replacement.maxPriorityFeePerGas.toString()},
            last_broadcast_at = ${at}, signed_at = ${at}, held_reason = NULL, held_since = NULL`,
        );
        yield* updateItems(
          id,
          sql`hashes = array_append(hashes, ${replacement.hash}), last_broadcast_at = ${at}`,
        );
      }),

    /** Deletes a chain's transactions, totals and nonces (the local stack's crash recovery); returns how many. */
    forgetChain: (chainId: number) =>
      Effect.gen(function* () {
        const removed =
          yield* sql`DELETE FROM billing.relayer_transactions WHERE chain_id = ${chainId} RETURNING id`;
        yield* spending.forgetSpending(chainId);
        yield* relayerNonces(sql).dropNonceSequences(chainId);
        return removed.length;
      }),
  };
});

export class RelayerStore extends Context.Service<RelayerStore>()("RelayerStore", { make }) {
  static readonly layer = Layer.effect(RelayerStore, make);
}
