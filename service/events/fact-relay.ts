/**
 * The fact relay: applies confirmed chain facts to the merchants' records and writes the events that
 * report them, in one transaction, exactly once. A fact is confirmed once its block is `confirmations`
 * deep under the chain's indexed head. One relay runs at a time (a transaction-scoped advisory lock;
 * other processes skip the pass), event ids derive from the facts, and the outbox's unique key guards
 * the rest, so restarts, reindexes and several service processes still report each fact once.
 * Facts whose payee is no merchant's payout address are not ours and are never read.
 */
import { PgClient } from "@effect/sql-pg";
import { Effect } from "effect";
import type { SqlClient, SqlError } from "effect/sql";
import { payoutOwners } from "../chains/merchant-chains.ts";
import { chainHeads } from "../chains/onchain.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Charges } from "../charges/charges.ts";
import { ONCHAIN_SCHEMA } from "../db/client.ts";
import { decodeRows } from "../db/rows.ts";
import { Mandates } from "../mandates/mandates.ts";
import type { Worker } from "../workers/workers.ts";
import { applyChargesSucceeded, applyFact, type FactContext } from "./fact-application.ts";
import { FactRow } from "./fact-events.ts";
import { insertEvents, type NewEvent } from "./outbox.ts";

const BATCH = 500;
const decodeFactRows = decodeRows(FactRow);

type RelayRequirements = PgClient.PgClient | SqlClient.SqlClient | ChainRegistry | Mandates | Charges;

/** One pass: applies up to BATCH confirmed facts; returns how many events were inserted. */
export const relayFacts: Effect.Effect<number, SqlError.SqlError, RelayRequirements> = Effect.gen(
  function* () {
    const sql = yield* PgClient.PgClient;
    const registry = yield* ChainRegistry;
    const mandates = yield* Mandates;
    const charges = yield* Charges;
    if (registry.all.length === 0) return 0;
    const heads = yield* chainHeads;
    const confirmed = registry.all.flatMap((chain) => {
      const head = heads.get(chain.id);
      return head === undefined
        ? []
        : [sql`(f.chain_id = ${chain.id} AND f.block_number <= ${head - BigInt(chain.confirmations)})`];
    });
    if (confirmed.length === 0) return 0;
    return yield* sql.withTransaction(
      Effect.gen(function* () {
        const [lock] = yield* sql<{ locked: boolean }>`
        SELECT pg_try_advisory_xact_lock(hashtext('billing.fact-relay')) AS locked`;
        if (!lock?.locked) return 0;
        // One Ponder relation in this statement (see chains/onchain.ts); the rest are our own tables.
        const facts = yield* sql`
        SELECT f.key, f.kind, f.chain_id, f.block_number::text, f.block_hash, f.timestamp::text, f.tx_hash,
               f.log_index, f.mandate_id, f.charge_id, f.amount::text, f.customer, f.payee, f.token, f.details
        FROM ${sql(ONCHAIN_SCHEMA)}.fact f
        WHERE ${sql.or(confirmed)}
          AND NOT EXISTS (SELECT 1 FROM billing.events e WHERE e.fact_key = f.key)
          AND lower(f.payee) IN (SELECT lower(mc.payout_address) FROM billing.merchant_chains mc
                                 WHERE mc.chain_id = f.chain_id)
        ORDER BY f.chain_id, f.block_number, f.log_index
        LIMIT ${BATCH}`.pipe(Effect.flatMap(decodeFactRows));
        if (facts.length === 0) return 0;
        const owners = yield* payoutOwners(facts.map((f) => ({ chainId: f.chain_id, payee: f.payee })));
        const events: NewEvent[] = [];
        // Consecutive charge.succeeded facts of one chain and merchant are applied together; any other
        // fact first applies the run before it, so records change in chain order.
        let run: { facts: FactRow[]; context: FactContext } | undefined;
        const applyRun = Effect.suspend(() => {
          const pending = run;
          run = undefined;
          return pending
            ? Effect.map(applyChargesSucceeded(pending.facts, pending.context), (applied) => {
                events.push(...applied);
              })
            : Effect.void;
        });
        for (const fact of facts) {
          const merchantId = owners.get(`${fact.chain_id}:${fact.payee}`);
          const chain = registry.byId(fact.chain_id);
          if (merchantId === undefined || chain === undefined) continue;
          if (fact.kind === "charge.succeeded") {
            if (run?.context.chain.id === chain.id && run.context.merchantId === merchantId) {
              run.facts.push(fact);
              continue;
            }
            yield* applyRun;
            run = { facts: [fact], context: { merchantId, chain, mandates, charges } };
            continue;
          }
          yield* applyRun;
          const event = yield* applyFact(fact, { merchantId, chain, mandates, charges });
          if (event) events.push(event);
        }
        yield* applyRun;
        return (yield* insertEvents(events)).length;
      }),
    );
  },
);

/** Woken by Ponder's notification after each indexed batch (and every second regardless). */
export const factRelay: Worker<RelayRequirements> = {
  name: "fact-relay",
  pass: Effect.gen(function* () {
    // Drain: a large backlog is relayed in consecutive batches.
    while ((yield* relayFacts) >= BATCH) yield* Effect.yieldNow;
  }),
  interval: "1 second",
  wakeOn: `${ONCHAIN_SCHEMA}_live_query`,
};
