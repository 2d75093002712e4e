/**
 * Reads of the indexer's tables for payments: whether facts are still on the chain, a deposit
 * address's funds, the chain's head. One Ponder relation per statement (see chains/onchain.ts).
 */
import { Effect, Schema } from "effect";
import { SqlClient } from "effect/sql";
import { ONCHAIN_SCHEMA } from "../db/client.ts";
import { decodeRows } from "../db/rows.ts";

const decodeKeys = decodeRows(Schema.Struct({ key: Schema.String }));
const decodeHead = decodeRows(
  Schema.Struct({ block_number: Schema.String, block_hash: Schema.String, timestamp: Schema.Number }),
);
const decodeFunds = decodeRows(
  Schema.Struct({ deposit_address: Schema.String, held: Schema.String, release_at: Schema.Number }),
);

/** The chain's newest indexed block (number, hash, time), if any. */
export const headOf = (chainId: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const [row] =
      yield* sql`SELECT block_number::text AS block_number, block_hash, timestamp::float8 AS timestamp
      FROM ${sql(ONCHAIN_SCHEMA)}.chain_head WHERE chain_id = ${chainId}`.pipe(Effect.flatMap(decodeHead));
    return row === undefined
      ? undefined
      : { number: BigInt(row.block_number), hash: row.block_hash, timestamp: row.timestamp };
  });

/** Which of these fact keys the indexer has in blocks up to `through`. */
export const factsPresent = (keys: ReadonlyArray<string>, through: bigint) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    if (keys.length === 0) return new Set<string>();
    const rows = yield* sql`SELECT key FROM ${sql(ONCHAIN_SCHEMA)}.fact
      WHERE key = ANY (${keys}::text[]) AND block_number <= ${through.toString()}::numeric`.pipe(
      Effect.flatMap(decodeKeys),
    );
    return new Set(rows.map((row) => row.key));
  });

/** The funds held for these deposit addresses now, as the indexer has them. */
export const heldFunds = (chainId: number, deposits: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    if (deposits.length === 0) return new Map<string, { held: string; releaseAt: number }>();
    const rows = yield* sql`SELECT deposit_address, held::text AS held, release_at::float8 AS release_at
      FROM ${sql(ONCHAIN_SCHEMA)}.payment_funds
      WHERE chain_id = ${chainId} AND deposit_address = ANY (${deposits}::text[])`.pipe(
      Effect.flatMap(decodeFunds),
    );
    return new Map(rows.map((row) => [row.deposit_address, { held: row.held, releaseAt: row.release_at }]));
  });
