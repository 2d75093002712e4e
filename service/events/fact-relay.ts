/**
 * The fact relay: applies confirmed chain facts to the merchants' records and writes the events that
 * report them, in one transaction, exactly once. A fact is confirmed once its block is `confirmations`
 * deep under the chain's indexed head. Event ids derive from the facts and the outbox's unique key
 * guards the rest, so restarts, reindexes and several service processes still report each fact once.
 *
 * Each chain has its own cursor (relay-cursor.ts) and its own lock, so a pass reads only the facts
 * after the cursor and chains never wait for each other. Every fact read moves the cursor: relayed,
 * not ours (no merchant's payout address), or declined (recorded in billing.skipped_facts and counted),
 * so no fact is read twice and no junk can hold the relay. A payout address registered after the
 * cursor passed its facts has its history relayed once (a backfill over the indexer's payee index).
 */
import { PgClient } from "@effect/sql-pg";
import { Array as Arr, Effect, Schema } from "effect";
import type { SqlClient, SqlError } from "effect/sql";
import type { ResolvedChain } from "../chains/config.ts";
import { payoutOwners } from "../chains/merchant-chains.ts";
import { chainHeads } from "../chains/onchain.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Charges } from "../charges/charges.ts";
import { ONCHAIN_SCHEMA } from "../db/client.ts";
import { decodeRows } from "../db/rows.ts";
import { Mandates } from "../mandates/mandates.ts";
import type { Worker } from "../workers/workers.ts";
import { applyChargesSucceeded, applyFact, declineReason, type FactContext } from "./fact-application.ts";
import { FactRow } from "./fact-events.ts";
import { insertEvents, type NewEvent } from "./outbox.ts";
import {
  advanceAnchors,
  countSkipped,
  type FactPosition,
  loadAnchors,
  rewindAnchors,
  saveAnchors,
} from "./relay-cursor.ts";

export const BATCH = 500;

const ReadRow = Schema.Struct({ ...FactRow.fields, anchor: Schema.Boolean, relayed: Schema.Boolean });
type ReadRow = typeof ReadRow.Type;
const decodeReadRows = decodeRows(ReadRow);
const decodeAnchorRows = decodeRows(Schema.Struct({ key: Schema.String, block_hash: Schema.String }));

type RelayRequirements = PgClient.PgClient | SqlClient.SqlClient | ChainRegistry | Mandates | Charges;

const positionOf = (fact: FactRow): FactPosition => ({
  block: fact.block_number,
  log_index: fact.log_index,
  key: fact.key,
  hash: fact.block_hash,
});

/** Serialises one chain's passes across processes; another chain's pass never waits for it. */
const lockChain = (chainId: number) =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient;
    const [lock] = yield* sql<{ locked: boolean }>`
      SELECT pg_try_advisory_xact_lock(hashtext(${`billing.fact-relay:${chainId}`})) AS locked`;
    return lock?.locked === true;
  });

/**
 * Applies the facts read (in chain order) that are ours and not yet relayed, and records the declined
 * ones. `excluded` payees are being backfilled: their facts are left to the backfill.
 */
const applyRead = (chain: ResolvedChain, read: ReadonlyArray<FactRow & { relayed: boolean }>) =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient;
    const mandates = yield* Mandates;
    const charges = yield* Charges;
    const fresh = read.filter((fact) => !fact.relayed);
    if (fresh.length === 0) return 0;
    const owners = yield* payoutOwners(fresh.map((f) => ({ chainId: f.chain_id, payee: f.payee })));
    // Read after the owners: an address registered meanwhile is either unknown above (its facts are
    // passed here and backfilled) or already listed here, so none of its facts is applied out of order.
    const excluded = new Set(
      (yield* sql<{ payee: string }>`SELECT payee FROM billing.fact_relay_backfills
        WHERE chain_id = ${chain.id} AND done_at IS NULL`).map((row) => row.payee),
    );
    return yield* applyOwned(chain, fresh, owners, excluded, { mandates, charges });
  });

const applyOwned = (
  chain: ResolvedChain,
  facts: ReadonlyArray<FactRow>,
  owners: ReadonlyMap<string, string>,
  excluded: ReadonlySet<string>,
  services: Pick<FactContext, "mandates" | "charges">,
) =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient;
    const owned = facts.flatMap((fact) => {
      const merchantId = owners.get(`${fact.chain_id}:${fact.payee.toLowerCase()}`);
      return merchantId === undefined || excluded.has(fact.payee.toLowerCase()) ? [] : [{ fact, merchantId }];
    });
    const events: NewEvent[] = [];
    // Consecutive charge.succeeded facts of one merchant are applied together; any other fact first
    // applies the run before it, so records change in chain order.
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
    for (const { fact, merchantId } of owned) {
      if (fact.kind === "charge.succeeded") {
        if (run?.context.merchantId === merchantId) {
          run.facts.push(fact);
          continue;
        }
        yield* applyRun;
        run = { facts: [fact], context: { merchantId, chain, ...services } };
        continue;
      }
      yield* applyRun;
      const event = yield* applyFact(fact, { merchantId, chain, ...services });
      if (event) events.push(event);
    }
    yield* applyRun;
    const reported = new Set(events.map((event) => event.key));
    const declinedFacts = owned.filter(({ fact }) => !reported.has(fact.key));
    let skipped = 0;
    if (Arr.isReadonlyArrayNonEmpty(declinedFacts)) {
      const declined = Arr.map(declinedFacts, ({ fact, merchantId }) => ({
        fact_key: fact.key,
        chain_id: fact.chain_id,
        merchant_id: merchantId,
        kind: fact.kind,
        reason: declineReason(fact.kind),
        payee: fact.payee.toLowerCase(),
        block_number: fact.block_number,
        tx_hash: fact.tx_hash,
        log_index: fact.log_index,
      }));
      // Keyed by fact: a fact read again after a rewind is not counted twice.
      const recorded = yield* sql<{
        fact_key: string;
      }>`INSERT INTO billing.skipped_facts ${sql.insert(declined)}
        ON CONFLICT DO NOTHING RETURNING fact_key`;
      skipped = recorded.length;
      yield* countSkipped(chain.id, skipped);
      if (skipped > 0)
        yield* Effect.logWarning("fact relay skipped facts it cannot apply").pipe(
          Effect.annotateLogs({
            chain: chain.id,
            skipped,
            reasons: [...new Set(declined.map((row) => row.reason))].join(","),
            first: declined[0].fact_key,
          }),
        );
    }
    yield* insertEvents(events);
    return skipped;
  });

/** The columns of FactRow, read from a Ponder `fact` relation aliased `f`. */
const FACT_COLUMNS = `f.key, f.kind, f.chain_id, f.block_number::text, f.block_hash, f.timestamp::text, f.tx_hash,
  f.log_index, f.mandate_id, f.charge_id, f.amount::text, f.customer, f.payee, f.token, f.details`;

/** One batch of the chain's facts after its cursor; true when there may be more to read at once. */
const relayChainBatch = (chain: ResolvedChain, confirmedBlock: bigint) =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient;
    if (!(yield* lockChain(chain.id))) return false;
    const anchors = yield* loadAnchors(chain.id);
    const cursor = anchors[anchors.length - 1];
    const conditions = [
      sql`f.chain_id = ${chain.id}`,
      sql`f.block_number <= ${confirmedBlock.toString()}::numeric`,
      ...(cursor
        ? [
            sql`(f.block_number, f.log_index, f.key) > (${cursor.block}::numeric, ${cursor.log_index}::int, ${cursor.key}::text)`,
          ]
        : []),
    ];
    const after = sql`
      SELECT false AS anchor, EXISTS (SELECT 1 FROM billing.events e WHERE e.fact_key = f.key) AS relayed,
             ${sql.literal(FACT_COLUMNS)}
      FROM ${sql(ONCHAIN_SCHEMA)}.fact f WHERE ${sql.and(conditions)}
      ORDER BY f.block_number, f.log_index, f.key
      LIMIT ${BATCH}`;
    // One Ponder relation in this statement (see chains/onchain.ts): the cursor's own fact is read in
    // the same snapshot as the facts after it, so a reorg cannot slip between the check and the read.
    const rows = yield* (
      cursor
        ? sql`SELECT true AS anchor, false AS relayed, ${sql.literal(FACT_COLUMNS)}
              FROM ${sql(ONCHAIN_SCHEMA)}.fact f WHERE f.key = ${cursor.key}
              UNION ALL (${after})`
        : after
    ).pipe(Effect.flatMap(decodeReadRows));
    if (cursor && !rows.some((row) => row.anchor && row.block_hash === cursor.hash)) {
      yield* rewind(chain, anchors);
      return true;
    }
    const read = rows.filter((row: ReadRow) => !row.anchor);
    const last = read[read.length - 1];
    if (last === undefined) return false;
    yield* applyRead(chain, read);
    yield* saveAnchors(chain.id, advanceAnchors(anchors, positionOf(last)));
    return read.length >= BATCH;
  });

/**
 * The block of the cursor's fact was replaced by a reorg deeper than the confirmations: back to the
 * newest anchor whose block is still there (or the start); facts read again that were relayed are
 * passed by their outbox key, and backfills in progress start over.
 */
const rewind = (chain: ResolvedChain, anchors: ReadonlyArray<FactPosition>) =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient;
    const current = yield* sql`SELECT key, block_hash FROM ${sql(ONCHAIN_SCHEMA)}.fact
      WHERE key = ANY (${anchors.map((a) => a.key)}::text[])`.pipe(Effect.flatMap(decodeAnchorRows));
    const kept = rewindAnchors(anchors, new Map(current.map((row) => [row.key, row.block_hash])));
    yield* saveAnchors(chain.id, kept);
    yield* sql`UPDATE billing.fact_relay_backfills SET block_number = NULL, log_index = NULL, fact_key = NULL
      WHERE chain_id = ${chain.id} AND done_at IS NULL`;
    yield* Effect.logWarning("fact relay cursor rewound after a reorg").pipe(
      Effect.annotateLogs({
        chain: chain.id,
        from_block: anchors[anchors.length - 1]?.block,
        to_block: kept[kept.length - 1]?.block ?? "start",
      }),
    );
  });

const BackfillRow = Schema.Struct({
  payee: Schema.String,
  block_number: Schema.NullOr(Schema.String),
  log_index: Schema.NullOr(Schema.Number),
  fact_key: Schema.NullOr(Schema.String),
});
const decodeBackfillRows = decodeRows(BackfillRow);

/**
 * One batch of a newly registered payout address's facts up to the cursor (the cursor's pass leaves
 * them to it until it is done); true when there may be more. Reads the indexer's payee index, so it
 * costs the address's history, not the chain's.
 */
const backfillBatch = (chain: ResolvedChain) =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient;
    const [backfill] = yield* sql`SELECT payee, block_number::text, log_index, fact_key
      FROM billing.fact_relay_backfills WHERE chain_id = ${chain.id} AND done_at IS NULL
      ORDER BY requested_at, payee LIMIT 1`.pipe(Effect.flatMap(decodeBackfillRows));
    if (backfill === undefined || !(yield* lockChain(chain.id))) return false;
    const cursor = (yield* loadAnchors(chain.id)).at(-1);
    const done = sql`UPDATE billing.fact_relay_backfills SET done_at = now()
      WHERE chain_id = ${chain.id} AND payee = ${backfill.payee}`;
    // No cursor yet: its first pass reads the chain from the start, this address included.
    if (cursor === undefined) return yield* Effect.as(done, true);
    const conditions = [
      sql`f.payee = ${backfill.payee}`,
      sql`f.chain_id = ${chain.id}`,
      sql`(f.block_number, f.log_index, f.key) <= (${cursor.block}::numeric, ${cursor.log_index}::int, ${cursor.key}::text)`,
      ...(backfill.block_number !== null && backfill.log_index !== null && backfill.fact_key !== null
        ? [
            sql`(f.block_number, f.log_index, f.key) > (${backfill.block_number}::numeric, ${backfill.log_index}::int, ${backfill.fact_key}::text)`,
          ]
        : []),
    ];
    // One Ponder relation in this statement (see chains/onchain.ts).
    const read = yield* sql`
      SELECT false AS anchor, EXISTS (SELECT 1 FROM billing.events e WHERE e.fact_key = f.key) AS relayed,
             ${sql.literal(FACT_COLUMNS)}
      FROM ${sql(ONCHAIN_SCHEMA)}.fact f WHERE ${sql.and(conditions)}
      ORDER BY f.block_number, f.log_index, f.key
      LIMIT ${BATCH}`.pipe(Effect.flatMap(decodeReadRows));
    const fresh = read.filter((fact) => !fact.relayed);
    if (fresh.length > 0) {
      const owners = yield* payoutOwners([{ chainId: chain.id, payee: backfill.payee }]);
      yield* applyOwned(chain, fresh, owners, new Set(), {
        mandates: yield* Mandates,
        charges: yield* Charges,
      });
    }
    const last = read[read.length - 1];
    if (read.length < BATCH || last === undefined) {
      yield* done;
      yield* Effect.logInfo("fact relay relayed a new payout address's history").pipe(
        Effect.annotateLogs({ chain: chain.id, payee: backfill.payee }),
      );
      return true;
    }
    yield* sql`UPDATE billing.fact_relay_backfills SET block_number = ${last.block_number},
        log_index = ${last.log_index}, fact_key = ${last.key}
      WHERE chain_id = ${chain.id} AND payee = ${backfill.payee}`;
    return true;
  });

/** Relays a chain's confirmed facts until it has caught up (or another process holds its lock). */
const drainChain = (chain: ResolvedChain, confirmedBlock: bigint) =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient;
    for (;;) {
      const more = yield* sql.withTransaction(relayChainBatch(chain, confirmedBlock));
      const backfilling = yield* sql.withTransaction(backfillBatch(chain));
      if (!more && !backfilling) return;
      yield* Effect.yieldNow;
    }
  });

/** One pass over every chain, the chains in parallel; fails with the first chain's failure. */
export const relayFacts: Effect.Effect<void, SqlError.SqlError, RelayRequirements> = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  if (registry.all.length === 0) return;
  const heads = yield* chainHeads;
  const [, failures] = yield* Effect.partition(
    registry.all,
    (chain) => {
      const head = heads.get(chain.id);
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
