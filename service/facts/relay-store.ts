/**
 * The one writer of the fact relay's own tables: each chain's cursor with its anchors and skipped
 * count (`fact_relay_cursors`), the facts it declined (`skipped_facts`), and the payout addresses
 * whose history it still has to go through (`fact_relay_backfills`).
 */
import { PgClient } from "@effect/sql-pg";
import { Array as Arr, Context, Effect, Layer, Schema } from "effect";
import { PayoutRegistrations } from "../chains/merchant-chains.ts";
import { decodeRows } from "../db/rows.ts";
import { FactPosition } from "./relay-cursor.ts";

export interface SkippedFact {
  readonly factKey: string;
  readonly chainId: number;
  readonly merchantId: string;
  readonly kind: string;
  readonly reason: string;
  readonly payee: string;
  readonly blockNumber: string;
  readonly txHash: string;
  readonly logIndex: number;
}

/** Where a backfill has read up to (its last fact's position), or null before its first batch. */
export interface BackfillProgress {
  readonly payee: string;
  readonly position: { readonly block: string; readonly logIndex: number; readonly key: string } | null;
}

const decodeAnchors = decodeRows(Schema.Struct({ anchors: Schema.Array(FactPosition) }));
const decodeCursor = decodeRows(
  Schema.Struct({ anchors: Schema.Array(FactPosition), backfilling: Schema.Boolean }),
);
const decodeKeys = decodeRows(Schema.Struct({ fact_key: Schema.String }));
const decodeBackfills = decodeRows(
  Schema.Struct({
    payee: Schema.String,
    block_number: Schema.NullOr(Schema.String),
    log_index: Schema.NullOr(Schema.Number),
    fact_key: Schema.NullOr(Schema.String),
  }),
);
const decodeCounters = decodeRows(
  Schema.Struct({
    chain_id: Schema.Number,
    block_number: Schema.NullOr(Schema.String),
    skipped_facts: Schema.NumberFromString,
  }),
);

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient;

  const countSkipped = (chainId: number, skipped: number) =>
    skipped === 0
      ? Effect.void
      : Effect.asVoid(sql`INSERT INTO billing.fact_relay_cursors (chain_id, skipped_facts)
          VALUES (${chainId}, ${skipped})
          ON CONFLICT (chain_id) DO UPDATE SET skipped_facts = billing.fact_relay_cursors.skipped_facts
            + EXCLUDED.skipped_facts, updated_at = now()`);

  const requestBackfill = (chainId: number, payee: string) =>
    Effect.asVoid(
      sql`INSERT INTO billing.fact_relay_backfills ${sql.insert({
        chain_id: chainId,
        payee: payee.toLowerCase(),
      })} ON CONFLICT DO NOTHING`,
    );

  return {
    /** The chain's anchors, newest (the cursor) last; [] before the first fact. */
    loadAnchors: (chainId: number) =>
      sql`SELECT anchors FROM billing.fact_relay_cursors WHERE chain_id = ${chainId}`.pipe(
        Effect.flatMap(decodeAnchors),
        Effect.map((rows) => rows[0]?.anchors ?? []),
      ),
    /**
     * The chain's anchors (as `loadAnchors`) and whether a payout address's history is still to be
     * relayed, in one statement: a pass with no backfill to do costs no more statements.
     */
    loadCursor: (chainId: number) =>
      sql`SELECT coalesce((SELECT anchors FROM billing.fact_relay_cursors WHERE chain_id = ${chainId}), '[]') AS anchors,
          EXISTS (SELECT 1 FROM billing.fact_relay_backfills WHERE chain_id = ${chainId} AND done_at IS NULL)
            AS backfilling`.pipe(
        Effect.flatMap(decodeCursor),
        Effect.map((rows) => ({
          anchors: rows[0]?.anchors ?? [],
          backfilling: rows[0]?.backfilling === true,
        })),
      ),
    /** Moves the chain's cursor (its last anchor). */
    saveAnchors: (chainId: number, anchors: ReadonlyArray<FactPosition>) => {
      const cursor = anchors[anchors.length - 1];
      return Effect.asVoid(sql`INSERT INTO billing.fact_relay_cursors ${sql.insert({
        chain_id: chainId,
        block_number: cursor?.block ?? null,
        log_index: cursor?.log_index ?? null,
        fact_key: cursor?.key ?? null,
        block_hash: cursor?.hash ?? null,
        anchors: sql.json(anchors),
      })}
        ON CONFLICT (chain_id) DO UPDATE SET block_number = EXCLUDED.block_number,
          log_index = EXCLUDED.log_index, fact_key = EXCLUDED.fact_key, block_hash = EXCLUDED.block_hash,
          anchors = EXCLUDED.anchors, updated_at = now()`);
    },
    /**
     * Records facts the relay declined and adds them to the chain's count; keyed by fact, so a fact read
     * again after a rewind is not counted twice. Returns how many were new.
     */
    recordSkipped: (chainId: number, facts: ReadonlyArray<SkippedFact>) =>
      Effect.gen(function* () {
        if (!Arr.isReadonlyArrayNonEmpty(facts)) return 0;
        const recorded = yield* sql`INSERT INTO billing.skipped_facts ${sql.insert(
          Arr.map(facts, (fact) => ({
            fact_key: fact.factKey,
            chain_id: fact.chainId,
            merchant_id: fact.merchantId,
            kind: fact.kind,
            reason: fact.reason,
            payee: fact.payee.toLowerCase(),
            block_number: fact.blockNumber,
            tx_hash: fact.txHash,
            log_index: fact.logIndex,
          })),
        )} ON CONFLICT DO NOTHING RETURNING fact_key`.pipe(Effect.flatMap(decodeKeys));
        yield* countSkipped(chainId, recorded.length);
        return recorded.length;
      }),
    /** Per chain: the cursor's block (null before the first fact) and how many facts it skipped. */
    counters: sql`SELECT chain_id::int, block_number::text, skipped_facts::text
      FROM billing.fact_relay_cursors ORDER BY chain_id`.pipe(
      Effect.flatMap(decodeCounters),
      Effect.map((rows) =>
        rows.map((row) => ({
          chainId: row.chain_id,
          cursorBlock: row.block_number === null ? null : BigInt(row.block_number),
          skippedFacts: row.skipped_facts,
        })),
      ),
    ),

    /** A payout address seen for the first time: its facts the cursor already passed are relayed once. */
    requestBackfill,
    /** The oldest backfill still to do on the chain. */
    nextBackfill: (chainId: number) =>
      sql`SELECT payee, block_number::text, log_index, fact_key FROM billing.fact_relay_backfills
        WHERE chain_id = ${chainId} AND done_at IS NULL ORDER BY requested_at, payee LIMIT 1`.pipe(
        Effect.flatMap(decodeBackfills),
        Effect.map((rows): BackfillProgress | undefined => {
          const row = rows[0];
          if (row === undefined) return undefined;
          return {
            payee: row.payee,
            position:
              row.block_number !== null && row.log_index !== null && row.fact_key !== null
                ? { block: row.block_number, logIndex: row.log_index, key: row.fact_key }
                : null,
          };
        }),
      ),
    backfillRead: (chainId: number, payee: string, last: { block: string; logIndex: number; key: string }) =>
      Effect.asVoid(sql`UPDATE billing.fact_relay_backfills SET block_number = ${last.block},
          log_index = ${last.logIndex}, fact_key = ${last.key}
        WHERE chain_id = ${chainId} AND payee = ${payee}`),
    backfillDone: (chainId: number, payee: string) =>
      Effect.asVoid(sql`UPDATE billing.fact_relay_backfills SET done_at = now()
        WHERE chain_id = ${chainId} AND payee = ${payee}`),
    /** After a rewind, backfills in progress start over. */
    restartBackfills: (chainId: number) =>
      Effect.asVoid(sql`UPDATE billing.fact_relay_backfills SET block_number = NULL, log_index = NULL,
          fact_key = NULL WHERE chain_id = ${chainId} AND done_at IS NULL`),

    /** The chain's facts are relayed afresh from the start (the local stack's crash recovery). */
    forgetChain: (chainId: number) =>
      Effect.gen(function* () {
        yield* sql`DELETE FROM billing.fact_relay_cursors WHERE chain_id = ${chainId}`;
        yield* sql`DELETE FROM billing.skipped_facts WHERE chain_id = ${chainId}`;
      }),
  };
});

export class RelayStore extends Context.Service<RelayStore>()("RelayStore", { make }) {
  static readonly layer = Layer.effect(RelayStore, make);
  /** Merchant chains tell the relay of a newly registered payout address through this. */
  static readonly payoutRegistrations = Layer.effect(
    PayoutRegistrations,
    Effect.map(RelayStore, (store) => ({ registered: store.requestBackfill })),
  );
}
