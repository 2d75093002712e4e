/**
 * The fact relay: turns confirmed chain facts into events in the outbox (billing.events), exactly once.
 * A fact is confirmed once its block is `confirmations` deep under the chain's indexed head. Its event id
 * and the outbox's unique fact key are derived from the fact, so any number of relay processes, restarts,
 * reindexes or replays insert each event once. Facts whose payee is no merchant's payout address are
 * not ours and are skipped.
 */
import { PgClient } from "@effect/sql-pg";
import { Array as Arr, Effect } from "effect";
import type { SqlError } from "effect/sql";
import { ChainRegistry } from "../chains/registry.ts";
import { ONCHAIN_SCHEMA } from "../db/client.ts";
import { decodeRows } from "../db/rows.ts";
import type { Worker } from "../workers/workers.ts";
import { ConfirmedFact, eventFromFact } from "./fact-events.ts";

export const EVENTS_CHANNEL = "billing_events";
const BATCH = 500;
const decodeFacts = decodeRows(ConfirmedFact);

/** One pass: relays up to BATCH confirmed facts; returns how many events were inserted. */
export const relayFacts: Effect.Effect<number, SqlError.SqlError, PgClient.PgClient | ChainRegistry> =
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient;
    const registry = yield* ChainRegistry;
    if (registry.all.length === 0) return 0;
    const onchain = sql(ONCHAIN_SCHEMA);
    const confirmations = sql.literal(
      registry.all.map((chain) => `(${Number(chain.id)}, ${Number(chain.confirmations)})`).join(", "),
    );
    const rows = yield* sql`
      WITH conf (chain_id, confirmations) AS (VALUES ${confirmations})
      SELECT f.key, f.kind, f.chain_id, f.block_number::text, f.block_hash, f.timestamp::text, f.tx_hash, f.log_index,
             f.mandate_id, f.charge_id, f.amount::text, f.details, m.customer, m.payee, m.token, owner.merchant_id
      FROM ${onchain}.fact f
      JOIN conf ON conf.chain_id = f.chain_id
      JOIN ${onchain}.chain_head h ON h.chain_id = f.chain_id
      JOIN ${onchain}.mandate m ON m.chain_id = f.chain_id AND m.mandate_id = f.mandate_id
      JOIN LATERAL (
        SELECT mc.merchant_id FROM billing.merchant_chains mc
        WHERE mc.chain_id = f.chain_id AND lower(mc.payout_address) = m.payee
        ORDER BY mc.created_at DESC LIMIT 1
      ) owner ON true
      WHERE f.block_number <= h.block_number - conf.confirmations
        AND NOT EXISTS (SELECT 1 FROM billing.events e WHERE e.fact_key = f.key)
      ORDER BY f.chain_id, f.block_number, f.log_index
      LIMIT ${BATCH}`.pipe(Effect.flatMap(decodeFacts));
    if (rows.length === 0) return 0;
    const events = rows.flatMap((fact) => {
      const chain = registry.all.find((c) => c.id === fact.chain_id);
      return chain ? [eventFromFact(fact, chain)] : [];
    });
    if (!Arr.isReadonlyArrayNonEmpty(events)) return 0;
    const inserted = yield* sql`
      INSERT INTO billing.events ${sql.insert(
        Arr.map(events, (event) => ({
          id: event.id,
          merchant_id: event.merchantId,
          livemode: event.livemode,
          type: event.type,
          created: new Date(event.created * 1000),
          payload: sql.json(event.payload),
          fact_key: event.factKey,
          chain_id: event.chainId,
          block_number: event.blockNumber,
          tx_hash: event.txHash,
          log_index: event.logIndex,
        })),
      )}
      ON CONFLICT DO NOTHING
      RETURNING id`;
    if (inserted.length > 0) yield* sql.notify(EVENTS_CHANNEL, String(inserted.length));
    return inserted.length;
  });

/** Woken by Ponder's notification after each indexed batch (and every second regardless). */
export const factRelay: Worker<PgClient.PgClient | ChainRegistry> = {
  name: "fact-relay",
  pass: Effect.gen(function* () {
    // Drain: a large backlog is relayed in consecutive batches.
    while ((yield* relayFacts) >= BATCH) yield* Effect.yieldNow;
  }),
  interval: "1 second",
  wakeOn: `${ONCHAIN_SCHEMA}_live_query`,
};
