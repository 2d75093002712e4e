/**
 * The fact relay: applies confirmed chain facts to the merchants' records and writes the events that
 * report them, in one transaction, exactly once. A fact is confirmed once its block is `confirmations`
 * deep under the chain's indexed head. Event ids derive from the facts and the outbox's unique key
 * guards the rest, so restarts, reindexes and several service processes still report each fact once.
 *
 * Each chain has its own cursor (relay-cursor.ts) and its own lock, so a pass reads only the facts
 * after the cursor and chains never wait for each other. Every fact read moves the cursor: relayed,
 * not ours (no merchant's payout address), or declined (recorded as skipped and counted), so no fact
 * is read twice and no junk can hold the relay. A payout address registered after the cursor passed
 * its facts has its history relayed once (a backfill over the indexer's payee index).
 */
import { PgClient } from "@effect/sql-pg";
import { Effect, Schema } from "effect";
import type { SqlClient, SqlError } from "effect/sql";
import type { BalanceStore } from "../balances/balance-store.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { chainHeads } from "../chains/onchain.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { ONCHAIN_SCHEMA } from "../db/client.ts";
import { decodeRows } from "../db/rows.ts";
import { type NewEvent, Outbox } from "../events/outbox.ts";
import type { Worker } from "../workers/worker.ts";
import { declineReason, FactApplication } from "./fact-application.ts";
import { FactReader, READ_BATCH, type ReadFact } from "./fact-reader.ts";
import type { FactRow } from "./fact-row.ts";
import { recordMovements } from "./ledger-facts.ts";
import { advanceAnchors, type FactPosition, rewindAnchors } from "./relay-cursor.ts";
import { planSteps } from "./relay-plan.ts";
import { RelayStore } from "./relay-store.ts";

type RelayRequirements =
  | PgClient.PgClient
  | SqlClient.SqlClient
  | ChainRegistry
  | FactApplication
  | FactReader
  | RelayStore
  | BalanceStore
  | Outbox;

const decodeLock = decodeRows(Schema.Struct({ locked: Schema.Boolean }));

const positionOf = (fact: FactRow): FactPosition => ({
  block: fact.block_number,
  log_index: fact.log_index,
  key: fact.key,
  hash: fact.block_hash,
});

/** Serialises one chain's passes across processes; another chain's pass never waits for it. */
export const lockChain = (chainId: number) =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient;
    const [lock] = yield* sql`
      SELECT pg_try_advisory_xact_lock(hashtext(${`billing.fact-relay:${chainId}`})) AS locked`.pipe(
      Effect.flatMap(decodeLock),
    );
    return lock?.locked === true;
  });

/**
 * Applies the facts of merchants' payout addresses in chain order, writes their events, and records those
 * it declined; returns how many it declined. Facts of no merchant's address are passed.
 */
const applyOwned = (chain: ResolvedChain, facts: ReadonlyArray<ReadFact>) =>
  Effect.gen(function* () {
    const application = yield* FactApplication;
    const store = yield* RelayStore;
    const outbox = yield* Outbox;
    const owned = facts.flatMap((fact) => (fact.owner === null ? [] : [{ fact, merchantId: fact.owner }]));
    const events: NewEvent[] = [];
    const applied = new Set<string>();
    for (const step of planSteps(owned)) {
      const owner = { merchantId: step.merchantId, chain };
      if (step.kind === "payments") {
        const run = yield* application.applyPayments(step.facts, owner);
        events.push(...run.events);
        for (const key of run.applied) applied.add(key);
      } else if (step.kind !== "one") {
        const reported =
          step.kind === "charges"
            ? yield* application.applyChargesSucceeded(step.facts, owner)
            : yield* application.applyMandatesAuthorized(step.facts, owner);
        events.push(...reported);
        for (const event of reported) applied.add(event.key);
      } else {
        const raised = yield* application.apply(step.fact, owner);
        if (raised === undefined) continue;
        events.push(...raised);
        applied.add(step.fact.key);
      }
    }
    const declined = owned
      .filter(({ fact }) => !applied.has(fact.key))
      .map(({ fact, merchantId }) => ({
        factKey: fact.key,
        chainId: fact.chain_id,
        merchantId,
        kind: fact.kind,
        reason: declineReason(fact.kind),
        payee: fact.payee,
        blockNumber: fact.block_number,
        txHash: fact.tx_hash,
        logIndex: fact.log_index,
      }));
    yield* recordMovements(
      chain,
      owned.filter(({ fact }) => applied.has(fact.key)),
    );
    const skipped = yield* store.recordSkipped(chain.id, declined);
    if (skipped > 0)
      yield* Effect.logWarning("fact relay skipped facts it cannot apply").pipe(
        Effect.annotateLogs({
          chain: chain.id,
          skipped,
          reasons: [...new Set(declined.map((row) => row.reason))].join(","),
          first: declined[0]?.factKey,
        }),
      );
    yield* outbox.insert(events);
    return skipped;
  });

/** The facts read not relayed yet, but for a payee being backfilled (its history is the backfill's). */
const applyRead = (chain: ResolvedChain, read: ReadonlyArray<ReadFact>) =>
  applyOwned(
    chain,
    read.filter((fact) => !fact.relayed && !fact.backfilling),
  );

/**
 * One batch of the chain's facts after its cursor (up to `confirmedBlock`, if given): whether there may
 * be more to read at once, and whether a payout address's history waits for a backfill batch.
 */
const relayChainBatch = (chain: ResolvedChain, confirmedBlock: bigint | undefined) =>
  Effect.gen(function* () {
    const store = yield* RelayStore;
    const reader = yield* FactReader;
    if (!(yield* lockChain(chain.id))) return { more: false, backfilling: false };
    const { anchors, backfilling } = yield* store.loadCursor(chain.id);
    const { cursorStands, read } = yield* reader.after(chain.id, confirmedBlock, anchors.at(-1));
    if (!cursorStands) {
      yield* rewind(chain, anchors);
      return { more: true, backfilling };
    }
    const last = read[read.length - 1];
    if (last === undefined) return { more: false, backfilling };
    yield* applyRead(chain, read);
    yield* store.saveAnchors(chain.id, advanceAnchors(anchors, positionOf(last)));
    return { more: read.length >= READ_BATCH, backfilling };
  });

/**
 * The block of the cursor's fact was replaced by a reorg deeper than the confirmations: back to the
 * newest anchor whose block is still there (or the start); facts read again that were relayed are
 * passed by their outbox key, and backfills in progress start over.
 */
const rewind = (chain: ResolvedChain, anchors: ReadonlyArray<FactPosition>) =>
  Effect.gen(function* () {
    const store = yield* RelayStore;
    const reader = yield* FactReader;
    const kept = rewindAnchors(anchors, yield* reader.blockHashes(anchors.map((a) => a.key)));
    yield* store.saveAnchors(chain.id, kept);
    yield* store.restartBackfills(chain.id);
    yield* Effect.logWarning("fact relay cursor rewound after a reorg").pipe(
      Effect.annotateLogs({
        chain: chain.id,
        from_block: anchors[anchors.length - 1]?.block,
        to_block: kept[kept.length - 1]?.block ?? "start",
      }),
    );
  });

/**
 * One batch of a newly registered payout address's facts up to the cursor (the cursor's pass leaves
 * them to it until it is done); true when there may be more. Reads the indexer's payee index, so it
 * costs the address's history, not the chain's.
 */
const backfillBatch = (chain: ResolvedChain) =>
  Effect.gen(function* () {
    const store = yield* RelayStore;
    const reader = yield* FactReader;
    const backfill = yield* store.nextBackfill(chain.id);
    if (backfill === undefined || !(yield* lockChain(chain.id))) return false;
    const cursor = (yield* store.loadAnchors(chain.id)).at(-1);
    // No cursor yet: its first pass reads the chain from the start, this address included.
    if (cursor === undefined) return yield* Effect.as(store.backfillDone(chain.id, backfill.payee), true);
    const read = yield* reader.ofPayee(chain.id, backfill.payee, cursor, backfill.position);
    yield* applyOwned(
      chain,
      read.filter((fact) => !fact.relayed),
    );
    const last = read[read.length - 1];
    if (read.length < READ_BATCH || last === undefined) {
      yield* store.backfillDone(chain.id, backfill.payee);
      yield* Effect.logInfo("fact relay relayed a new payout address's history").pipe(
        Effect.annotateLogs({ chain: chain.id, payee: backfill.payee }),
      );
      return true;
    }
    yield* store.backfillRead(chain.id, backfill.payee, {
      block: last.block_number,
      logIndex: last.log_index,
      key: last.key,
    });
    return true;
  });

/**
 * Relays a chain's confirmed facts (up to `confirmedBlock`, if given) until it has caught up (or another
 * process holds its lock).
 */
const drainChain = (chain: ResolvedChain, confirmedBlock: bigint | undefined) =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient;
    for (;;) {
      const { more, backfilling } = yield* sql.withTransaction(relayChainBatch(chain, confirmedBlock));
      const backfilled = backfilling ? yield* sql.withTransaction(backfillBatch(chain)) : false;
      if (!more && !backfilled) return;
      yield* Effect.yieldNow;
    }
  });

/**
 * One pass over every chain, the chains in parallel; fails with the first chain's failure. A chain that
 * waits for no confirmations relays every fact indexed, so its head is not read (the indexer writes the
 * head in the transaction of the block's facts).
 */
export const relayFacts: Effect.Effect<void, SqlError.SqlError, RelayRequirements> = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  if (registry.all.length === 0) return;
  const heads = registry.all.some((chain) => chain.confirmations > 0) ? yield* chainHeads : undefined;
  const [, failures] = yield* Effect.partition(
    registry.all,
    (chain) => {
      if (chain.confirmations === 0) return drainChain(chain, undefined);
      const head = heads?.get(chain.id);
      return head === undefined ? Effect.void : drainChain(chain, head - BigInt(chain.confirmations));
    },
    { concurrency: "unbounded" },
  );
  const [failure] = failures;
  if (failure !== undefined) return yield* Effect.fail(failure);
});

/** Woken by Ponder's notification after each indexed batch (and every second regardless). */
export const factRelay: Worker<RelayRequirements> = {
  name: "fact-relay",
  pass: relayFacts,
  interval: "1 second",
  wakeOn: `${ONCHAIN_SCHEMA}_live_query`,
};
