/**
 * A persistent local chain after a crash: anvil saves its state every few seconds, so after a `kill -9`
 * it may come back some blocks older than what the indexer and the service recorded from it. Before the
 * indexer starts, each local chain's recorded blocks (the indexer's checkpoint, head and RPC cache, the
 * service's charges, events and relayer transactions) are checked against the chain; one it no longer has
 * (a number past its head, or another hash) means the chain lost blocks, and then the indexer's build
 * schemas and that chain's RPC cache are dropped and what the service derived from the chain is forgotten
 * (service/maintenance/forget-chain.ts), so the chain is indexed afresh. docs/development.md, "After a
 * crash".
 */
import { Effect } from "effect";
import { SqlClient } from "effect/sql";
import { forgetChain, forgetChainLayer } from "../../service/maintenance/forget-chain.ts";
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
        const cleared = yield* forgetChain(chain.id);
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
    }).pipe(Effect.provide(forgetChainLayer(databaseUrl))),
  );
