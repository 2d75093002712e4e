/**
 * Recovery of a local chain that lost blocks. anvil saves its state file every few seconds, so a power
 * cut (SIGKILL of the whole stack) can bring the chain back older than what the indexer and the service
 * already recorded from it: Ponder then refuses to start ("unrecoverable reorg"), and the service holds
 * charges for blocks the chain no longer has.
 *
 * Before the indexer starts, the stack compares every block anything recorded from a local chain (the
 * indexer's checkpoint and head, its RPC cache, the service's charges, events and relayer transactions)
 * with the chain itself. On a divergence it rebuilds what derives from that chain: the indexer's build
 * schemas are dropped and its cache for the chain is cleared (it reindexes from the chain as it is), and
 * the service's records of the chain (mandates, charges, subscriptions and their invoices and usage,
 * relayer transactions, the events that reported them and their deliveries, stored idempotent replies)
 * are removed. Merchants, API keys, payout addresses, webhook endpoints, prices and coupons are kept.
 * Mandates still on the chain come back from it, as mandates signed on chain (`origin: "chain"`).
 */
import { PgClient } from "@effect/sql-pg";
import { Effect, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import { rpc } from "./anvil.ts";

interface SeenBlock {
  readonly source: string;
  readonly number: bigint;
  /** Unknown for records that keep only a block number. */
  readonly hash: string | null;
}

export interface LocalChainRpc {
  readonly id: number;
  readonly http: string;
}

const BUILD_SCHEMA = /^ponder_[0-9a-f]{12}$/;

const hexNumber = (value: bigint) => `0x${value.toString(16)}`;

const blockHashAt = async (url: string, number: bigint): Promise<string | null> => {
  const block = (await rpc(url, "eth_getBlockByNumber", [hexNumber(number), false])) as {
    hash: string;
  } | null;
  return block?.hash ?? null;
};

/** Every block something recorded from the chain: the newest of each source. */
const seenBlocks = (chainId: number, buildSchema: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const schemas = new Set(
      (yield* sql<{ name: string }>`SELECT nspname AS name FROM pg_namespace`).map((row) => row.name),
    );
    const seen: SeenBlock[] = [];
    const add = (source: string, rows: ReadonlyArray<{ number: string | null; hash?: string | null }>) => {
      for (const row of rows)
        if (row.number !== null) seen.push({ source, number: BigInt(row.number), hash: row.hash ?? null });
    };
    if (schemas.has(buildSchema)) {
      const build = sql(buildSchema);
      add(
        "indexer checkpoint",
        yield* sql<{ number: string }>`SELECT ltrim(substr(latest_checkpoint, 27, 16), '0') AS number
          FROM ${build}._ponder_checkpoint WHERE chain_id = ${chainId}`.pipe(
          Effect.map((rows) => rows.map((row) => ({ number: row.number === "" ? "0" : row.number }))),
        ),
      );
      add(
        "indexed head",
        yield* sql<{ number: string; hash: string }>`SELECT block_number::text AS number, block_hash AS hash
          FROM ${build}.chain_head WHERE chain_id = ${chainId}`,
      );
    }
    if (schemas.has("ponder_sync"))
      add(
        "indexer cache",
        yield* sql<{
          number: string;
          hash: string;
        }>`SELECT number::text AS number, hash FROM ponder_sync.blocks
          WHERE chain_id = ${chainId} ORDER BY number DESC LIMIT 1`,
      );
    if (schemas.has("billing")) {
      add(
        "charges",
        yield* sql<{ number: string; hash: string }>`SELECT block_number::text AS number, block_hash AS hash
          FROM billing.charges WHERE chain_id = ${chainId} AND block_number IS NOT NULL
          ORDER BY block_number DESC LIMIT 1`,
      );
      add(
        "events",
        yield* sql<{ number: string | null }>`SELECT max(block_number)::text AS number FROM billing.events
          WHERE chain_id = ${chainId}`,
      );
      add(
        "relayer transactions",
        yield* sql<{ number: string | null }>`SELECT max(block_number)::text AS number
          FROM billing.relayer_transactions WHERE chain_id = ${chainId}`,
      );
    }
    return seen;
  });

/** Removes the service's records of one chain, children first; returns what was removed, by kind. */
const clearServiceRecords = (chainId: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const count = (rows: ReadonlyArray<unknown>) => rows.length;
    return yield* sql.withTransaction(
      Effect.gen(function* () {
        const objects = sql`(
          SELECT id FROM billing.mandates WHERE chain_id = ${chainId}
          UNION ALL SELECT id FROM billing.charges WHERE chain_id = ${chainId}
          UNION ALL SELECT id FROM billing.subscriptions WHERE chain_id = ${chainId}
          UNION ALL SELECT i.id FROM billing.invoices i JOIN billing.subscriptions s ON s.id = i.subscription_id
            WHERE s.chain_id = ${chainId}
          UNION ALL SELECT u.id FROM billing.usage_records u JOIN billing.subscriptions s ON s.id = u.subscription_id
            WHERE s.chain_id = ${chainId})`;
        const events = yield* sql<{ id: string }>`SELECT id FROM billing.events
          WHERE chain_id = ${chainId}
             OR payload #>> '{data,object,id}' IN ${objects}
             OR payload #>> '{data,object,mandate}' IN ${objects}
             OR payload #>> '{data,object,subscription}' IN ${objects}`;
        const eventIds = events.map((row) => row.id);
        yield* sql`DELETE FROM billing.webhook_attempts a USING billing.webhook_deliveries d
          WHERE a.delivery_id = d.id AND d.event_id = ANY(${eventIds})`;
        yield* sql`DELETE FROM billing.webhook_deliveries WHERE event_id = ANY(${eventIds})`;
        yield* sql`DELETE FROM billing.events WHERE id = ANY(${eventIds})`;
        yield* sql`DELETE FROM billing.usage_records u USING billing.subscriptions s
          WHERE s.id = u.subscription_id AND s.chain_id = ${chainId}`;
        yield* sql`DELETE FROM billing.invoices i USING billing.subscriptions s
          WHERE s.id = i.subscription_id AND s.chain_id = ${chainId}`;
        const subscriptions = count(
          yield* sql`DELETE FROM billing.subscriptions WHERE chain_id = ${chainId} RETURNING id`,
        );
        const charges = count(
          yield* sql`DELETE FROM billing.charges WHERE chain_id = ${chainId} RETURNING id`,
        );
        const mandates = count(
          yield* sql`DELETE FROM billing.mandates WHERE chain_id = ${chainId} RETURNING id`,
        );
        const transactions = count(
          yield* sql`DELETE FROM billing.relayer_transactions WHERE chain_id = ${chainId} RETURNING id`,
        );
        // The chain's facts are relayed afresh from the start: the cursor could name a block that is gone.
        yield* sql`DELETE FROM billing.fact_relay_cursors WHERE chain_id = ${chainId}`;
        yield* sql`DELETE FROM billing.skipped_facts WHERE chain_id = ${chainId}`;
        // A stored reply could name a record that no longer exists: replaying it would be a lie.
        yield* sql`DELETE FROM billing.idempotency_keys`;
        return {
          mandates,
          charges,
          subscriptions,
          events: eventIds.length,
          "relayer transactions": transactions,
        };
      }),
    );
  });

/** Drops the indexer's build schemas and its RPC cache of the chain, so it indexes the chain afresh. */
const clearIndexer = (chainId: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const builds = yield* sql<{
      name: string;
    }>`SELECT nspname AS name FROM pg_namespace WHERE nspname LIKE 'ponder\\_%'`;
    for (const { name } of builds) if (BUILD_SCHEMA.test(name)) yield* sql`DROP SCHEMA ${sql(name)} CASCADE`;
    const cached = yield* sql<{ table: string }>`SELECT table_name AS table FROM information_schema.columns
      WHERE table_schema = 'ponder_sync' AND column_name = 'chain_id'`;
    for (const { table } of cached)
      yield* sql`DELETE FROM ${sql("ponder_sync")}.${sql(table)} WHERE chain_id = ${chainId}`;
  });

/**
 * Checks each local chain against what was recorded from it and rebuilds what derives from a chain
 * that lost blocks. Returns one line per chain that was rebuilt.
 */
export const recoverLocalChains = (
  databaseUrl: string,
  buildSchema: string,
  chains: readonly LocalChainRpc[],
): Promise<string[]> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const lines: string[] = [];
      for (const chain of chains) {
        const head = BigInt((yield* Effect.promise(() => rpc(chain.http, "eth_blockNumber"))) as string);
        const seen = yield* seenBlocks(chain.id, buildSchema);
        const lost: SeenBlock[] = [];
        for (const block of seen) {
          if (block.number > head) lost.push(block);
          else if (block.hash !== null) {
            const hash = yield* Effect.promise(() => blockHashAt(chain.http, block.number));
            if (hash?.toLowerCase() !== block.hash.toLowerCase()) lost.push(block);
          }
        }
        if (lost.length === 0) continue;
        const newest = lost.reduce((a, b) => (b.number > a.number ? b : a));
        yield* clearIndexer(chain.id);
        const cleared = yield* clearServiceRecords(chain.id);
        const removed = Object.entries(cleared)
          .map(([kind, n]) => `${kind}: ${n}`)
          .join(", ");
        lines.push(
          `Local chain ${chain.id}: lost blocks in a crash (it is at #${head}, ${newest.source} had #${newest.number}); ` +
            `reindexed it and cleared what derived from it (${removed}); merchants, keys, payout addresses, ` +
            "endpoints, prices and coupons kept.",
        );
      }
      return lines;
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 }))),
  );
