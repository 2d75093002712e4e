/**
 * `npm run bench:latency`: how long from a charge mined on anvil to its event in the outbox.
 * Starts the real stack (embedded Postgres, anvil over WebSocket, Ponder, service) on fresh ports,
 * with confirmations = 0, makes N charges one after another (N = LATENCY_CHARGES, default 1,000), and
 * waits for each event through Postgres LISTEN. Runs twice: on an empty history, then on a fresh
 * stack whose indexer already holds LATENCY_HISTORY_FACTS (default 1,000,000; 0 skips the run) facts
 * of the merchant's payout address, each with its event in the outbox (years of operation,
 * bulk-inserted), so the relay's cost per pass must not grow with history.
 *
 * This process hosts the service (as `npm start` does); the customer, the operator sending the charges
 * and the watcher run in a process of their own (bench/latency-load.ts). The baseline, in the same run:
 * the same charge's fact seen in Ponder's own table (checked after each of Ponder's notifications).
 * Each charge is also timed at the relay's transaction start and its outbox insert (from Postgres's
 * clock), and GC pauses of this process are recorded, so the results say where the time goes. Writes
 * bench/results/latency.json (bench/report.ts).
 *
 * Profiling: LATENCY_HEAP_PROFILE=<file> samples this process's allocations over each run's measured
 * charges (`node:inspector`'s sampling heap profiler) and writes <file>-<history facts>.heapprofile:
 * every allocation, or with LATENCY_HEAP_PROFILE_PROMOTED=1 those that outlived a scavenge (what makes
 * a scavenge long); summarised by bench/heap-profile.ts. With pg_stat_statements loaded
 * (`POSTGRES_FLAGS="-c shared_preload_libraries=pg_stat_statements"`), the statements of each run's
 * measured charges are printed, costliest first.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { constants, PerformanceObserver } from "node:perf_hooks";
import { PgClient } from "@effect/sql-pg";
import { Effect, Redacted } from "effect";
import { type ScratchStack, startScratchStack } from "../scripts/stack/scratch-stack.ts";
import { LOCAL_PAYOUT_ADDRESS } from "../scripts/stack/seed.ts";
import type { LatencyLoad, SeenCharge } from "./latency-load.ts";
import { benchChain } from "./local-chain-config.ts";
import { percentiles, ratioTo, type SummaryRow, wall, writeResults } from "./report.ts";

/**
 * 1,000 charges a run (100 s at 10 blocks a second): the p99 is then the 10th-slowest charge. With 200
 * it was the 3rd-slowest, and the first few charges, which run on code the JIT has not compiled yet, or
 * one stall of Ponder's, moved it by 20 ms from run to run (docs/performance.md at 64b9879, tenth round).
 */
const N = Number(process.env.LATENCY_CHARGES ?? 1_000);
/**
 * Charges are sent one every LATENCY_INTERVAL_MS (default 100 ms: 10 blocks a second, five times Base's
 * block rate). Ponder 0.17 limits itself to 20 JSON-RPC requests a second per RPC URL at first (and
 * raises the limit only slowly); back-to-back charges on automining anvil (a block each, ~25 a second)
 * exceed that and measure Ponder's rate limiter, not the pipeline.
 */
const INTERVAL_MS = Number(process.env.LATENCY_INTERVAL_MS ?? 100);
const HISTORY_FACTS = Number(process.env.LATENCY_HISTORY_FACTS ?? 1_000_000);
const HEAP_PROFILE = process.env.LATENCY_HEAP_PROFILE;

/**
 * Samples allocations until the returned function is called with a file name. V8 has one sampling heap
 * profiler per isolate, so a run counts either every allocation or (LATENCY_HEAP_PROFILE_PROMOTED=1)
 * only those no scavenge collected: what was promoted, or still lived at the end.
 */
const sampleAllocations = async () => {
  const session = new Session();
  session.connect();
  await session.post("HeapProfiler.startSampling", {
    samplingInterval: 16_384,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: process.env.LATENCY_HEAP_PROFILE_PROMOTED !== "1",
  });
  return async (file: string) => {
    const { profile } = await session.post("HeapProfiler.stopSampling");
    writeFileSync(file, JSON.stringify(profile));
    session.disconnect();
  };
};

/**
 * Years of history, bulk-inserted: facts of the merchant's payout address (charges, one authorization in
 * twelve) in the live build's fact table, spread over the blocks indexed so far, each with its event in
 * the outbox. Ponder's triggers are off for the insert (`session_replication_role = replica`): they would
 * record each row for reorg handling. Returns the seconds the insert took and the relay's catch-up.
 */
const seedHistory = (databaseUrl: string, merchantId: string, facts: number) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient;
      const [head] = yield* sql<{ n: string }>`SELECT block_number::text AS n FROM onchain.chain_head`;
      const blocks = Number(head?.n ?? 1);
      const payee = LOCAL_PAYOUT_ADDRESS.toLowerCase();
      const started = performance.now();
      yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* sql`SET LOCAL session_replication_role = replica`;
          yield* sql`INSERT INTO onchain.fact (key, kind, chain_id, block_number, block_hash, timestamp, tx_hash,
              log_index, mandate_id, charge_id, amount, customer, payee, token, details)
            SELECT CASE WHEN is_auth THEN '31337:mandate.authorized:' || mandate || ':1'
                        ELSE '31337:charge.succeeded:' || charge END,
                   CASE WHEN is_auth THEN 'mandate.authorized' ELSE 'charge.succeeded' END,
                   31337, 1 + (i * ${blocks}::bigint) / ${facts}::bigint, '0x' || md5('block' || (1 + (i * ${blocks}::bigint) / ${facts}::bigint)) || md5('b'),
                   1600000000 + i, '0x' || md5('tx' || i) || md5('t' || i), i, mandate,
                   CASE WHEN is_auth THEN NULL ELSE charge END,
                   CASE WHEN is_auth THEN NULL ELSE 19990000 END,
                   '0x' || substr(md5('customer' || (i / 12)), 1, 40), ${payee}, '0x' || substr(md5('usdc'), 1, 40),
                   CASE WHEN is_auth
                     THEN jsonb_build_object('cap', '25000000', 'anchor', 1600000000, 'approval_periods', 12,
                            'operator', '0x' || substr(md5('operator'), 1, 40), 'hold_seconds', 0, 'nonce', '1',
                            'approval', '300000000')
                     ELSE jsonb_build_object('period', (i % 12), 'release_at', 1600000000 + i,
                            'approval_left', '280010000') END
            FROM (SELECT i, i % 12 = 0 AS is_auth,
                         '0x' || substr(md5('customer' || (i / 12)), 1, 40) || substr(md5('salt' || i / 12), 1, 24) AS mandate,
                         '0x' || md5('charge' || i) || md5('c' || i) AS charge
                  FROM generate_series(0, ${facts - 1}::int) AS i) AS g`;
          yield* sql`INSERT INTO billing.events (id, merchant_id, livemode, type, created, payload, fact_key,
              chain_id, block_number, tx_hash, log_index)
            SELECT 'evt_0' || lpad(f.log_index::text, 25, '0'), ${merchantId}, false, f.kind, to_timestamp(f.timestamp),
                   jsonb_build_object('id', 'evt_0' || lpad(f.log_index::text, 25, '0'), 'object', 'event',
                     'type', f.kind, 'created', f.timestamp, 'livemode', false,
                     'data', jsonb_build_object('object', jsonb_build_object('object',
                       CASE WHEN f.kind = 'mandate.authorized' THEN 'mandate' ELSE 'charge' END))),
                   f.key, 31337, f.block_number, f.tx_hash, f.log_index
            FROM onchain.fact f WHERE f.timestamp >= 1600000000 AND f.timestamp < 1700000000`;
        }),
      );
      // The live build's fact table is the one table behind the onchain.fact view.
      const [build] = yield* sql<{ schema: string }>`SELECT DISTINCT n.nspname AS schema
        FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
        JOIN pg_class t ON t.oid = d.refobjid JOIN pg_namespace n ON n.oid = t.relnamespace
        WHERE r.ev_class = 'onchain.fact'::regclass AND t.relname = 'fact' AND n.nspname <> 'onchain'`;
      // Vacuumed and checkpointed too: otherwise autovacuum of the fresh rows and the checkpoint of the
      // bulk insert's WAL land in the measurement (a one-off stall of 16 s in one run), which years of
      // operation would not have.
      if (build) yield* sql`VACUUM (ANALYZE) ${sql(build.schema)}.fact`;
      yield* sql`VACUUM (ANALYZE) billing.events`;
      yield* sql`CHECKPOINT`;
      const seeded = (performance.now() - started) / 1000;
      // The relay's cursor starts at the beginning (as after the migration that added it) and reads the
      // whole history once; every fact is already in the outbox, so none is applied again.
      const caughtUp = performance.now();
      for (;;) {
        const [row] = yield* sql<{
          log_index: number | null;
        }>`SELECT log_index FROM billing.fact_relay_cursors
          WHERE chain_id = 31337`;
        if ((row?.log_index ?? -1) >= facts - 1) break;
        yield* Effect.sleep("200 millis");
      }
      const catchUp = (performance.now() - caughtUp) / 1000;
      // What one pass of the previous relay's query (an anti-join of every confirmed fact against the
      // outbox) costs on this history, for the record.
      const before = performance.now();
      yield* sql`SELECT f.key FROM onchain.fact f
        WHERE f.chain_id = 31337 AND f.block_number <= ${blocks}
          AND NOT EXISTS (SELECT 1 FROM billing.events e WHERE e.fact_key = f.key)
          AND lower(f.payee) IN (SELECT lower(mc.payout_address) FROM billing.merchant_chains mc
                                 WHERE mc.chain_id = f.chain_id)
        ORDER BY f.chain_id, f.block_number, f.log_index LIMIT 500`;
      const antiJoin = performance.now() - before;
      return { seeded, catchUp, antiJoin, blocks };
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 }))),
  );

/**
 * On a started stack: seeds the history, runs the load (bench/latency-load.ts) and reads the relay's own
 * times; what each charge went through, and this process's GC pauses meanwhile.
 */
const observe = async (scratch: ScratchStack, historyFacts: number) => {
  const { stack } = scratch;
  const resolved = stack.chains[0];
  if (!resolved?.rpc || !resolved.escrow.address) throw new Error("no resolved chain");
  const history =
    historyFacts > 0
      ? await seedHistory(stack.databaseUrl, stack.devMerchant.merchantId, historyFacts)
      : undefined;
  if (history)
    console.log(
      `seeded ${historyFacts} facts and events in ${history.seeded.toFixed(1)} s; relay caught up in ${history.catchUp.toFixed(1)} s; the old anti-join pass took ${history.antiJoin.toFixed(0)} ms`,
    );

  // The outside world (a customer, an operator and a watcher) in a process of its own
  // (bench/latency-load.ts); this one hosts the service, as `npm start` does, and records its GC pauses
  // (and, with LATENCY_HEAP_PROFILE, its allocations) while the measured charges run.
  const gcPauses: { at: number; ms: number; major: boolean }[] = [];
  const gcObserver = new PerformanceObserver((list) => {
    for (const entry of list.getEntries())
      gcPauses.push({
        at: wall(entry.startTime),
        ms: entry.duration,
        major:
          ((entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ?? 0) ===
          constants.NODE_PERFORMANCE_GC_MAJOR,
      });
  });
  let heapMb = 0;
  let heapSampling: ((file: string) => Promise<void>) | undefined;
  const resultsDir = mkdtempSync(join(tmpdir(), "latency-load-"));
  const load: LatencyLoad = {
    rpcUrl: resolved.rpc.http[0] ?? "",
    escrow: resolved.escrow.address as `0x${string}`,
    usdc: resolved.tokens[0]?.address as `0x${string}`,
    payee: LOCAL_PAYOUT_ADDRESS as `0x${string}`,
    databaseUrl: stack.databaseUrl,
    charges: N,
    intervalMs: INTERVAL_MS,
    resultsFile: join(resultsDir, "charges.json"),
  };
  const seen = await new Promise<SeenCharge[]>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [...process.execArgv, join(import.meta.dirname, "latency-load.ts")],
      {
        stdio: ["ignore", "inherit", "inherit", "ipc"],
        env: { ...process.env, LATENCY_LOAD: JSON.stringify(load) },
      },
    );
    child.on("message", (message) => {
      if (message === "measuring") {
        console.log(`measuring ${N} charges ...`);
        heapMb = Math.round(process.memoryUsage().heapUsed / 2 ** 20);
        gcObserver.observe({ entryTypes: ["gc"] });
        if (HEAP_PROFILE !== undefined)
          void sampleAllocations().then((stop) => {
            heapSampling = stop;
          });
      } else if (message === "measured") gcObserver.disconnect();
    });
    child.once("error", reject);
    child.once("exit", (code) =>
      code === 0
        ? resolve(JSON.parse(readFileSync(load.resultsFile, "utf8")) as SeenCharge[])
        : reject(new Error(`bench/latency-load.ts exited with ${code}`)),
    );
  }).finally(() => rmSync(resultsDir, { recursive: true, force: true }));
  gcObserver.disconnect();
  await heapSampling?.(`${HEAP_PROFILE}-${historyFacts}.heapprofile`);
  // The relay's own times, from Postgres's clock (the same machine's): its transaction's start (the
  // charge row's updated_at is now()) and the outbox insert (inserted_at is clock_timestamp()).
  const stamps = await Effect.runPromise(
    Effect.flatMap(
      Effect.service(PgClient.PgClient),
      (sql) => sql<{ fact_key: string; relay_started: number; inserted: number }>`
        SELECT e.fact_key, extract(epoch FROM c.updated_at) * 1000 AS relay_started,
               extract(epoch FROM e.inserted_at) * 1000 AS inserted
        FROM billing.events e JOIN billing.charges c ON c.id = e.payload #>> '{data,object,id}'
        WHERE e.fact_key IN ${sql.in(seen.map((m) => m.factKey))}`,
    ).pipe(
      Effect.scoped,
      Effect.provide(PgClient.layer({ url: Redacted.make(stack.databaseUrl), maxConnections: 1 })),
    ),
  );
  const byKey = new Map(stamps.map((row) => [row.fact_key, row]));
  const charges = seen.map((m) => ({
    ...m,
    relayStarted: Number(byKey.get(m.factKey)?.relay_started ?? Number.NaN),
    inserted: Number(byKey.get(m.factKey)?.inserted ?? Number.NaN),
  }));
  return { history, charges, gcPauses, heapMb };
};

const measure = async (historyFacts: number) => {
  console.log(`starting the stack (history: ${historyFacts} facts) ...`);
  const scratch = await startScratchStack("latency", { chains: [benchChain("latency")] });
  // Stopped whatever happens: a run that fails leaves no Postgres, anvil or Ponder behind.
  const { history, charges, gcPauses, heapMb } = await observe(scratch, historyFacts).finally(() =>
    scratch.stop(),
  );

  const stages = {
    total: charges.map((c) => c.seen - c.mined),
    indexed: charges.map((c) => c.indexed - c.mined),
    /** What the service adds to Ponder: its row seen -> the event seen. */
    relay_added: charges.map((c) => c.seen - c.indexed),
    indexed_to_relay_start: charges.map((c) => c.relayStarted - c.indexed),
    relay_start_to_outbox_insert: charges.map((c) => c.inserted - c.relayStarted),
    outbox_insert_to_seen: charges.map((c) => c.seen - c.inserted),
  };
  const slowest = charges
    .map((c, index) => ({ ...c, index }))
    .sort((a, b) => b.seen - b.mined - (a.seen - a.mined))
    .slice(0, 5);
  const round = (ms: number) => Math.round(ms * 10) / 10;
  return {
    history_facts: historyFacts,
    ...(history
      ? {
          history_seconds_to_seed: Math.round(history.seeded * 10) / 10,
          relay_catch_up_seconds: Math.round(history.catchUp * 10) / 10,
          previous_relay_query_ms: Math.round(history.antiJoin),
        }
      : {}),
    charges: charges.length,
    ...percentiles(stages.total),
    /** Receipt -> the fact in Ponder's own table (seen after Ponder's notification): the baseline. */
    indexed: percentiles(stages.indexed),
    stages: Object.fromEntries(Object.entries(stages).map(([name, values]) => [name, percentiles(values)])),
    slowest: slowest.map((c) => ({
      /** Its place in the run (0: the first charge). */
      charge: c.index,
      total: round(c.seen - c.mined),
      indexed: round(c.indexed - c.mined),
      relay_started: round(c.relayStarted - c.mined),
      inserted: round(c.inserted - c.mined),
      gc_ms_during: round(
        gcPauses.filter((g) => g.at + g.ms >= c.mined && g.at <= c.seen).reduce((sum, g) => sum + g.ms, 0),
      ),
    })),
    gc: {
      heap_used_mb_at_start: heapMb,
      major: gcPauses.filter((g) => g.major).length,
      pauses: gcPauses.length,
      total_ms: round(gcPauses.reduce((sum, g) => sum + g.ms, 0)),
      ...percentiles(gcPauses.map((g) => g.ms)),
    },
  };
};

const empty = await measure(0);
console.log(JSON.stringify(empty, null, 2));
const withHistory = HISTORY_FACTS > 0 ? await measure(HISTORY_FACTS) : undefined;
if (withHistory) console.log(JSON.stringify(withHistory, null, 2));
/**
 * The event's p99 over Ponder's own (receipt → its row) in the same run: the relay from Ponder's row to
 * the outbox may take at most what Ponder takes.
 */
const TARGET_RATIO = 2;
const row = (run: typeof empty, label: string): SummaryRow => ({
  what: `chain -> event p99, 10 blocks/s, ${label}`,
  figure: run.p99_ms,
  unit: "ms",
  baseline: run.indexed.p99_ms,
  baseline_what: "Ponder over WebSocket alone: receipt -> its row, p99",
  ratio: ratioTo(run.p99_ms, run.indexed.p99_ms),
  target: `ratio ≤ ${TARGET_RATIO}`,
  meets_target: run.p99_ms <= TARGET_RATIO * run.indexed.p99_ms,
});
const summary = [
  row(empty, "empty history"),
  ...(withHistory ? [row(withHistory, `${HISTORY_FACTS.toLocaleString("en-US")} facts of history`)] : []),
];
writeResults("latency", "npm run bench:latency", summary, {
  what: "charge transaction mined on anvil (receipt returned) -> its charge.succeeded event in the outbox (billing.events)",
  conditions: `Ponder 0.17.7 over WebSocket, confirmations 0, one charge every ${INTERVAL_MS} ms (a block each), ${N} charges per run, each run on a fresh stack`,
  runs: withHistory ? [empty, withHistory] : [empty],
});
for (const r of summary)
  console.log(
    `${r.what}: ${r.figure} ms (Ponder alone ${r.baseline} ms, ratio ${r.ratio}; target ${r.target})`,
  );
