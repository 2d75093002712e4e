/**
 * Reads of the indexer's `fact` view (`onchain.fact`) for the relay: a chain's facts after a position,
 * in chain order; and a payout address's facts up to a position (backfills). Each fact comes with what
 * the relay decides by, read in the same snapshot: whether the outbox already reported it, the merchant
 * whose payout address it names, and whether that address's history is still being backfilled. A
 * registration writes the address and its backfill in one transaction, so a pass sees both or neither.
 * One Ponder relation per statement (see chains/onchain.ts).
 */
import { PgClient } from "@effect/sql-pg";
import { Context, Effect, Layer, Schema } from "effect";
import { ONCHAIN_SCHEMA } from "../db/client.ts";
import { fixed } from "../db/query.ts";
import { decodeRows } from "../db/rows.ts";
import { FactRow } from "./fact-row.ts";
import type { FactPosition } from "./relay-cursor.ts";

export const READ_BATCH = 500;

const ReadRow = Schema.Struct({
  ...FactRow.fields,
  anchor: Schema.Boolean,
  /** The outbox already has the fact's event. */
  relayed: Schema.Boolean,
  /** The merchant whose payout address (on the fact's chain) the fact names; a payout address has one. */
  owner: Schema.NullOr(Schema.String),
  /** The payee's history is being relayed by a backfill, which the chain's cursor leaves it to. */
  backfilling: Schema.Boolean,
});
/** A fact read, with what the relay decides by. */
export type ReadFact = Omit<typeof ReadRow.Type, "anchor">;
const decodeReadRows = decodeRows(ReadRow);
const decodeHashes = decodeRows(Schema.Struct({ key: Schema.String, block_hash: Schema.String }));
const decodeFactRows = decodeRows(FactRow);

const COLUMNS =
  fixed(`f.key, f.kind, f.chain_id, f.block_number::text, f.block_hash, f.timestamp::text, f.tx_hash,
  f.log_index, f.mandate_id, f.charge_id, f.payment_id, f.amount::text, f.customer, f.payee, f.token, f.details`);
const DECIDED_BY = fixed(`EXISTS (SELECT 1 FROM billing.events e WHERE e.fact_key = f.key) AS relayed,
  (SELECT mc.merchant_id FROM billing.merchant_chains mc
    WHERE mc.chain_id = f.chain_id AND lower(mc.payout_address) = lower(f.payee) LIMIT 1) AS owner,
  EXISTS (SELECT 1 FROM billing.fact_relay_backfills b
    WHERE b.chain_id = f.chain_id AND b.payee = lower(f.payee) AND b.done_at IS NULL) AS backfilling`);

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient;
  const facts = sql`${sql(ONCHAIN_SCHEMA)}.fact f`;
  const position = sql`(f.block_number, f.log_index, f.key)`;
  const at = (p: { readonly block: string; readonly logIndex: number; readonly key: string }) =>
    sql`(${p.block}::numeric, ${p.logIndex}::int, ${p.key}::text)`;

  return {
    /**
     * The chain's facts after `cursor` up to `confirmedBlock` (every one indexed when undefined), in chain order; `cursorStands` says
     * whether the cursor's own fact still has its block hash, read in the same snapshot, so a reorg
     * cannot slip between the check and the read.
     */
    after: (chainId: number, confirmedBlock: bigint | undefined, cursor: FactPosition | undefined) =>
      Effect.gen(function* () {
        const where = [
          sql`f.chain_id = ${chainId}`,
          ...(confirmedBlock === undefined
            ? []
            : [sql`f.block_number <= ${confirmedBlock.toString()}::numeric`]),
          ...(cursor
            ? [sql`${position} > ${at({ block: cursor.block, logIndex: cursor.log_index, key: cursor.key })}`]
            : []),
        ];
        const after = sql`SELECT false AS anchor, ${DECIDED_BY}, ${COLUMNS} FROM ${facts}
          WHERE ${sql.and(where)} ORDER BY f.block_number, f.log_index, f.key LIMIT ${READ_BATCH}`;
        const rows = yield* (
          cursor
            ? sql`SELECT true AS anchor, false AS relayed, NULL AS owner, false AS backfilling, ${COLUMNS}
                  FROM ${facts} WHERE f.key = ${cursor.key}
                  UNION ALL (${after})`
            : after
        ).pipe(Effect.flatMap(decodeReadRows));
        return {
          cursorStands:
            cursor === undefined || rows.some((row) => row.anchor && row.block_hash === cursor.hash),
          read: rows.filter((row) => !row.anchor) as ReadonlyArray<ReadFact>,
        };
      }),
    /** The block hashes the facts named now have (a fact whose block was dropped is missing). */
    blockHashes: (keys: ReadonlyArray<string>) =>
      sql`SELECT key, block_hash FROM ${facts} WHERE key = ANY (${keys}::text[])`.pipe(
        Effect.flatMap(decodeHashes),
        Effect.map((rows) => new Map(rows.map((row) => [row.key, row.block_hash]))),
      ),
    /** A payout address's facts after `from` (or from the start) up to `through`, in chain order. */
    ofPayee: (
      chainId: number,
      payee: string,
      through: FactPosition,
      from: { readonly block: string; readonly logIndex: number; readonly key: string } | null,
    ) =>
      sql`SELECT false AS anchor, ${DECIDED_BY}, ${COLUMNS} FROM ${facts}
        WHERE ${sql.and([
          sql`f.payee = ${payee}`,
          sql`f.chain_id = ${chainId}`,
          sql`${position} <= ${at({ block: through.block, logIndex: through.log_index, key: through.key })}`,
          ...(from ? [sql`${position} > ${at(from)}`] : []),
        ])}
        ORDER BY f.block_number, f.log_index, f.key LIMIT ${READ_BATCH}`.pipe(
        Effect.flatMap(decodeReadRows),
        Effect.map((rows) => rows as ReadonlyArray<ReadFact>),
      ),
    /**
     * The chain's facts of `kinds` after `from` (or from the start) up to `through`, in chain order (the
     * ledger's backfill of facts relayed before it existed).
     */
    ofKindsThrough: (
      chainId: number,
      kinds: ReadonlyArray<string>,
      through: FactPosition,
      from: { readonly block: string; readonly logIndex: number; readonly key: string } | null,
    ) =>
      sql`SELECT false AS anchor, ${DECIDED_BY}, ${COLUMNS} FROM ${facts}
        WHERE ${sql.and([
          sql`f.chain_id = ${chainId}`,
          sql`f.kind = ANY (${kinds}::text[])`,
          sql`${position} <= ${at({ block: through.block, logIndex: through.log_index, key: through.key })}`,
          ...(from ? [sql`${position} > ${at(from)}`] : []),
        ])}
        ORDER BY f.block_number, f.log_index, f.key LIMIT ${READ_BATCH}`.pipe(
        Effect.flatMap(decodeReadRows),
        Effect.map((rows) => rows as ReadonlyArray<ReadFact>),
      ),
    /** The facts of these keys the indexer has in blocks up to `through`, as they stand now. */
    byKeys: (keys: ReadonlyArray<string>, through: bigint) =>
      keys.length === 0
        ? Effect.succeed([] as ReadonlyArray<FactRow>)
        : sql`SELECT ${COLUMNS} FROM ${facts}
            WHERE f.key = ANY (${keys}::text[]) AND f.block_number <= ${through.toString()}::numeric`.pipe(
            Effect.flatMap(decodeFactRows),
          ),
  };
});

export class FactReader extends Context.Service<FactReader>()("FactReader", { make }) {
  static readonly layer = Layer.effect(FactReader, make);
}
