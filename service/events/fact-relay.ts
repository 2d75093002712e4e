/**
 * The fact relay: turns confirmed chain facts into events in the outbox (billing.events), exactly once.
 * A fact is confirmed once its block is `confirmations` deep under the chain's indexed head. Its event id
 * and the outbox's unique fact key are derived from the fact, so any number of relay processes, restarts,
 * reindexes or replays insert each event once. Facts whose payee is no merchant's payout address are
 * not ours and are skipped.
 */
import { PgClient } from "@effect/sql-pg";
import { Array as Arr, Effect } from "effect";
import type { SqlClient, SqlError } from "effect/sql";
import { payoutOwners } from "../chains/merchant-chains.ts";
import { chainHeads } from "../chains/onchain.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { ONCHAIN_SCHEMA } from "../db/client.ts";
import { decodeRows } from "../db/rows.ts";
import type { Worker } from "../workers/workers.ts";
import { type ConfirmedFact, eventFromFact, FactRow } from "./fact-events.ts";

export const EVENTS_CHANNEL = "billing_events";
const BATCH = 500;
const decodeFactRows = decodeRows(FactRow);

/** One pass: relays up to BATCH confirmed facts; returns how many events were inserted. */
export const relayFacts: Effect.Effect<
  number,
  SqlError.SqlError,
  PgClient.PgClient | SqlClient.SqlClient | ChainRegistry
> = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient;
  const registry = yield* ChainRegistry;
  if (registry.all.length === 0) return 0;
  const heads = yield* chainHeads;
  const confirmed = registry.all.flatMap((chain) => {
    const head = heads.get(chain.id);
    return head === undefined
      ? []
      : [sql`(f.chain_id = ${chain.id} AND f.block_number <= ${head - BigInt(chain.confirmations)})`];
  });
  if (confirmed.length === 0) return 0;
  const facts = yield* sql`
      SELECT f.key, f.kind, f.chain_id, f.block_number::text, f.block_hash, f.timestamp::text, f.tx_hash, f.log_index,
             f.mandate_id, f.charge_id, f.amount::text, f.customer, f.payee, f.token, f.details
      FROM ${sql(ONCHAIN_SCHEMA)}.fact f
      WHERE ${sql.or(confirmed)}
        AND NOT EXISTS (SELECT 1 FROM billing.events e WHERE e.fact_key = f.key)
      ORDER BY f.chain_id, f.block_number, f.log_index
      LIMIT ${BATCH}`.pipe(Effect.flatMap(decodeFactRows));
  if (facts.length === 0) return 0;
  const owners = yield* payoutOwners(facts.map((f) => ({ chainId: f.chain_id, payee: f.payee })));
  const rows: ConfirmedFact[] = facts.flatMap((fact) => {
    const merchant = owners.get(`${fact.chain_id}:${fact.payee}`);
    return merchant ? [{ ...fact, merchant_id: merchant }] : [];
  });
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
export const factRelay: Worker<PgClient.PgClient | SqlClient.SqlClient | ChainRegistry> = {
  name: "fact-relay",
  pass: Effect.gen(function* () {
    // Drain: a large backlog is relayed in consecutive batches.
    while ((yield* relayFacts) >= BATCH) yield* Effect.yieldNow;
  }),
  interval: "1 second",
  wakeOn: `${ONCHAIN_SCHEMA}_live_query`,
};
