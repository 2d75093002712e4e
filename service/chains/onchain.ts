/**
 * Reads of chain truth from Ponder's tables (through the `onchain` views). Every statement that reads
 * Ponder's tables, here and elsewhere, reads one Ponder relation only: a statement that joins several
 * holds a lock on one while it waits for the next, and Ponder's reorg handling takes stronger locks on
 * the same tables, so a join can deadlock with it (observed: Postgres aborted one side with "deadlock
 * detected"). Facts carry what their readers need, so no join is required.
 */
import { Effect, Schema } from "effect";
import { SqlClient } from "effect/sql";
import { ONCHAIN_SCHEMA } from "../db/client.ts";
import { decodeRows } from "../db/rows.ts";

const Head = Schema.Struct({ chain_id: Schema.Number, block_number: Schema.String });
const decodeHeads = decodeRows(Head);

/** The newest indexed block per chain. */
export const chainHeads = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const rows = yield* sql`SELECT chain_id, block_number::text FROM ${sql(ONCHAIN_SCHEMA)}.chain_head`.pipe(
    Effect.flatMap(decodeHeads),
  );
  return new Map(rows.map((row) => [row.chain_id, BigInt(row.block_number)]));
});
