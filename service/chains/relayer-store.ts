/**
 * The one writer of `billing.relayer_transactions`: every transaction the relayer signed, with its
 * purpose (unique per chain), its action (a return, an authorization: at most one attempt live), the
 * bytes and every hash broadcast, and what became of it. Times come from the Clock.
 *
 * Nonces come from one Postgres sequence per chain and account (`billing.rnonce_<chain>_<address>`):
 * `nextval` neither blocks nor rolls back, so concurrent submissions (parallel charge batches) take
 * nonces without waiting for each other's transactions. A nonce taken by a transaction that rolled back
 * is a gap; the tracker fills it once no submission holds the account's shared lock.
 *
 * The hourly budget reads `billing.relayer_spending`, also written here: each transaction's cost (gas
 * limit × max fee until mined, then gas used × price, nothing once superseded) added to its account's
 * total of the minute it was created, by the same statement that writes the transaction, so the totals
 * always equal the sum over the transactions. A total per backend (`pg_backend_pid()`): no two
 * concurrent transactions update the same row, so none waits on another's row lock.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect";
import { SqlClient } from "effect/sql";
import type { Hex } from "viem";
import { type Fragment, fixed, relation, selectRows } from "../db/query.ts";
import { decodeRows } from "../db/rows.ts";
import { newId } from "../ids.ts";

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
    t.action, t.status, t.block_number::text, t.last_broadcast_at`,
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
}

/** An item of a transaction that carries several (see insertItems). */
export interface NewItem {
  readonly purpose: string;
  readonly action: string;
  readonly data: Hex;
}

const decodeText = decodeRows(Schema.Struct({ value: Schema.NullOr(Schema.String) }));
const decodeIds = decodeRows(Schema.Struct({ id: Schema.String }));
const decodeAsked = decodeRows(Schema.Struct({ asked: Schema.Number }));
const decodeChains = decodeRows(Schema.Struct({ chain_id: Schema.Number }));
const decodeNonces = decodeRows(Schema.Struct({ nonce: Schema.Number }));
const decodeNames = decodeRows(Schema.Struct({ name: Schema.String }));
const decodeActions = decodeRows(Schema.Struct({ count: Schema.Number, oldest: Schema.NullOr(Schema.Date) }));

/** What a transaction row counts against the budget now. */
const COST = fixed(
  "coalesce(spent_wei, CASE WHEN status = 'superseded' THEN 0 ELSE gas_limit * max_fee_per_gas END)",
);
/** The minute a time falls in, whatever the session's time zone. */
const minuteOf = (column: string) =>
  fixed(`date_bin('1 minute', ${column}, timestamptz '2000-01-01 00:00:00+00')`);
/** The same minute computed here (the origin above is a whole minute since the epoch). */
export const startOfMinute = (at: Date): Date => new Date(Math.floor(at.getTime() / 60_000) * 60_000);
const ADD_TO_TOTAL = fixed(`ON CONFLICT (chain_id, from_address, minute, backend)
  DO UPDATE SET wei = billing.relayer_spending.wei + excluded.wei`);

const accountKey = (chainId: number, from: string) => `relayer:${chainId}:${from}`;
const purposeKey = (chainId: number, purpose: string) => `relayer-purpose:${chainId}:${purpose}`;
const actionKey = (chainId: number, action: string) => `relayer-action:${chainId}:${action}`;

/** The nonce sequence's name; chain id and address are checked, so the name is safe to splice into DDL. */
const nonceSequence = (chainId: number, from: string) =>
  Number.isSafeInteger(chainId) && chainId >= 0 && /^0x[0-9a-f]{40}$/.test(from)
    ? Effect.succeed(`billing.rnonce_${chainId}_${from.slice(2)}`)
    : Effect.die(new Error(`no nonce sequence for chain ${chainId} and account ${from}`));

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const select = (where: ReadonlyArray<Fragment>, options?: Parameters<typeof selectRows>[3]) =>
    selectRows(sql, TRANSACTIONS, where, options);
  const now = Effect.map(Clock.currentTimeMillis, (millis) => new Date(millis));
  const actionBelow = (end: string | undefined) => (end === undefined ? sql`true` : sql`action ~<~ ${end}`);
  /**
   * The account's lock shared, then `keys` exclusively in the order of their lock ids (`hashtext`), the
   * same order for every holder: a lone submission and a group, or two groups, sharing keys wait for
   * each other instead of deadlocking, also when two keys' ids collide (ordered by their text, the
   * locks would follow another order than the ids' whenever two collided, and a lone submission took its
   * purpose before its action where a group took the action first).
   */
  const holdKeys = (chainId: number, from: string, keys: ReadonlyArray<string>) =>
    Effect.asVoid(
      Effect.andThen(
        sql`SELECT pg_advisory_xact_lock_shared(hashtext(${accountKey(chainId, from)}))`,
        sql`SELECT pg_advisory_xact_lock(id)
          FROM (SELECT DISTINCT hashtext(k) AS id FROM unnest(${[...keys]}::text[]) AS k ORDER BY id) AS ids`,
      ),
    );
  /**
   * Updates a transaction and, in the same statement, its account's total of the minute by what the
   * update changed in its cost (the CTE's `old` sees the row as it was before the update).
   */
  const updateCounted = (id: string, set: Fragment) =>
    Effect.asVoid(sql`WITH old AS (SELECT ${COST} AS wei FROM billing.relayer_transactions WHERE id = ${id}),
        new AS (UPDATE billing.relayer_transactions SET ${set} WHERE id = ${id}
          RETURNING chain_id, from_address, created_at, ${COST} AS wei)
      INSERT INTO billing.relayer_spending (chain_id, from_address, minute, backend, wei)
        SELECT new.chain_id, new.from_address, ${minuteOf("new.created_at")}, pg_backend_pid(), new.wei - old.wei
        FROM new, old WHERE new.wei <> old.wei
      ${ADD_TO_TOTAL}`);
  /** The same change to the items a transaction carries (they cost nothing: no total to update). */
  const updateItems = (carrierId: string, set: Fragment) =>
    Effect.asVoid(sql`UPDATE billing.relayer_transactions SET ${set} WHERE carrier_id = ${carrierId}`);
  const ofAccount = (chainId: number, from: string) => [
    sql`t.chain_id = ${chainId}`,
    sql`t.from_address = ${from}`,
  ];

  return {
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
    /**
     * Waits until no submission of the account on the chain is in flight, and keeps new ones out until
     * the transaction ends: every nonce taken is then either recorded or lost to a rollback.
     */
    lockAccount: (chainId: number, from: string) =>
      Effect.asVoid(sql`SELECT pg_advisory_xact_lock(hashtext(${accountKey(chainId, from)}))`),
    /**
     * Held by a submission until its transaction ends: the account's lock shared (submissions run side by
     * side; only the tracker's gap filling waits for them), its purpose and action exclusively (the same
     * purpose submitted twice at once yields one transaction).
     */
    holdSubmission: (chainId: number, from: string, purpose: string, action: string | null) =>
      holdKeys(chainId, from, [
        purposeKey(chainId, purpose),
        ...(action === null ? [] : [actionKey(chainId, action)]),
      ]),
    /** A group's `holdSubmission`: the account's lock shared, every item's purpose and action exclusively. */
    holdItems: (chainId: number, from: string, items: ReadonlyArray<{ purpose: string; action: string }>) =>
      holdKeys(
        chainId,
        from,
        items.flatMap((item) => [purposeKey(chainId, item.purpose), actionKey(chainId, item.action)]),
      ),
    /** Creates the account's nonce sequence on the chain if missing, starting past every recorded nonce. */
    ensureNonceSequence: (chainId: number, from: string) =>
      sql.withTransaction(
        Effect.gen(function* () {
          yield* sql`SELECT pg_advisory_xact_lock(hashtext(${accountKey(chainId, from)}))`;
          // Items share their carrier's nonce, so the carriers' highest is the account's (and the
          // partial index relayer_transactions_nonce holds it).
          const [highest] = yield* sql`SELECT coalesce(max(nonce) + 1, 0)::int AS nonce
            FROM billing.relayer_transactions
            WHERE chain_id = ${chainId} AND from_address = ${from} AND carrier_id IS NULL`.pipe(
            Effect.flatMap(decodeNonces),
          );
          const name = yield* nonceSequence(chainId, from);
          yield* sql.unsafe(
            `CREATE SEQUENCE IF NOT EXISTS ${name} MINVALUE 0 START WITH ${highest?.nonce ?? 0}`,
          );
        }),
      ),
    /**
     * The next nonce of the account on the chain, at least `atLeast` (the node's pending count: nonces
     * below it are used already, by us or by another holder of the key).
     */
    takeNonce: (chainId: number, from: string, atLeast: number) =>
      Effect.gen(function* () {
        const name = yield* nonceSequence(chainId, from);
        const [taken] = yield* sql`SELECT nextval(${name}::regclass)::int AS nonce`.pipe(
          Effect.flatMap(decodeNonces),
        );
        const nonce = taken?.nonce ?? 0;
        if (nonce >= atLeast) return nonce;
        // Skipped by taking values, never by setval: a concurrent nextval can never be handed out twice.
        const [skipped] = yield* sql`SELECT max(nextval(${name}::regclass))::int AS nonce
          FROM generate_series(1, ${atLeast - nonce})`.pipe(Effect.flatMap(decodeNonces));
        return skipped?.nonce ?? atLeast;
      }),
    /**
     * Wei spent (or, while pending, at most to be spent) by the account on a chain by transactions
     * created since the start of the minute `since` falls in: up to a minute more than since `since`.
     */
    spentSince: (chainId: number, from: string, since: Date) =>
      sql`SELECT coalesce(sum(wei), 0)::text AS value FROM billing.relayer_spending
        WHERE chain_id = ${chainId} AND from_address = ${from}
          AND minute >= ${startOfMinute(since)}`.pipe(
        Effect.flatMap(decodeText),
        Effect.map((rows) => BigInt(rows[0]?.value ?? "0")),
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
        })} RETURNING *),
          cost AS (INSERT INTO billing.relayer_spending (chain_id, from_address, minute, backend, wei)
            SELECT chain_id, from_address, ${minuteOf("created_at")}, pg_backend_pid(), ${COST} FROM t ${ADD_TO_TOTAL})
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

    /** Drops the budget's totals of minutes before `before` (nothing reads them any more). */
    pruneSpending: (before: Date) =>
      Effect.asVoid(sql`DELETE FROM billing.relayer_spending WHERE minute < ${startOfMinute(before)}`),
    /** Chains on which the account has pending transactions. */
    chainsWithPending: (from: string) =>
      sql`SELECT DISTINCT chain_id::int AS chain_id FROM billing.relayer_transactions
        WHERE status = 'pending' AND from_address = ${from} AND carrier_id IS NULL`.pipe(
        Effect.flatMap(decodeChains),
        Effect.map((rows) => rows.map((row) => row.chain_id)),
      ),
    pendingNonces: (chainId: number, from: string) =>
      select([...ofAccount(chainId, from), sql`t.status = 'pending'`, sql`t.carrier_id IS NULL`]).pipe(
        Effect.map((rows) => rows.map((row) => row.nonce)),
      ),
    /** The account's pending transactions (not the items they carry), by chain and nonce. */
    pendingIds: (from: string) =>
      sql`SELECT id FROM billing.relayer_transactions
        WHERE status = 'pending' AND from_address = ${from} AND carrier_id IS NULL ORDER BY chain_id, nonce`.pipe(
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
        spentWei: bigint;
        skipped: ReadonlyArray<string>;
      },
    ) =>
      Effect.andThen(
        updateCounted(
          id,
          sql`status = ${receipt.status}, block_number = ${receipt.blockNumber}, mined_hash = ${receipt.hash},
            spent_wei = ${receipt.spentWei.toString()}`,
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
    /** The same nonce signed again with higher fees; every hash broadcast is kept (by its items too). */
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
            last_broadcast_at = ${at}`,
        );
        yield* updateItems(
          id,
          sql`hashes = array_append(hashes, ${replacement.hash}), last_broadcast_at = ${at}`,
        );
      }),

    /** Deletes a chain's transactions (the local stack's crash recovery); returns how many. */
    forgetChain: (chainId: number) =>
      Effect.gen(function* () {
        const removed =
          yield* sql`DELETE FROM billing.relayer_transactions WHERE chain_id = ${chainId} RETURNING id`;
        yield* sql`DELETE FROM billing.relayer_spending WHERE chain_id = ${chainId}`;
        const sequences = yield* sql`SELECT relname AS name FROM pg_class c
            JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'billing' AND c.relkind = 'S' AND starts_with(relname, ${`rnonce_${chainId}_`})`.pipe(
          Effect.flatMap(decodeNames),
        );
        for (const { name } of sequences) yield* sql.unsafe(`DROP SEQUENCE IF EXISTS billing.${name}`);
        return removed.length;
      }),
  };
});

export class RelayerStore extends Context.Service<RelayerStore>()("RelayerStore", { make }) {
  static readonly layer = Layer.effect(RelayerStore, make);
}
