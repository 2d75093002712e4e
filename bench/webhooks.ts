/**
 * `npm run bench:webhooks`: webhook delivery throughput and latency, side by side with a bare undici
 * POST loop to the same receivers (the ratio is the figure).
 *
 * Embedded Postgres, the service's own dispatcher (claims, signing, undici, batched attempt records),
 * M loopback receivers in a child process. Two phases for each side:
 * - burst: N events × M endpoints all at once; deliveries per second until every one is received and,
 *   for the dispatcher, every attempt is recorded (`succeeded` in Postgres);
 * - paced: RATE deliveries per second for SECONDS; p50/p99 from outbox insert (the bare loop: from the
 *   moment the request is queued) to receipt.
 * Writes bench/results/webhooks.json (bench/report.ts shape: summary rows beside the bare loop's figures).
 * WEBHOOK_BENCH_PG_STATS=1 starts the bench's Postgres with pg_stat_statements and prints the
 * statements that took the most time during the dispatcher's phases, and WEBHOOK_BENCH_CPU_PROF=<file>
 * writes a CPU profile of this process during the dispatcher's phases (for profiling).
 * WEBHOOK_BENCH_STAGES=1 times each stage of every paced delivery (insert, wake-up, claim, queue, send,
 * record; bench/webhook-stages.ts) and prints their percentiles, GC pauses and event-loop delay.
 * Each burst records the CPU seconds of every process taking part (sender or dispatcher, inserter,
 * Postgres, receivers), so a ratio can be read as work per delivery as well as wall time.
 * Each side's burst runs once, unmeasured, before the measured one: both sides then run with their code
 * compiled, as a long-running service would (the team's answer in issue 48: the ratio is warm).
 * WEBHOOK_BENCH_WARM=0 measures each side's first burst in a fresh process instead (cold).
 * WEBHOOK_BENCH_RUNS (default 3, or 1 with a profiling switch) runs the whole bench that many times,
 * each in a fresh process, and reports the median of each figure (bench/webhook-runs.ts).
 */
import { type ChildProcess, fork } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Effect, Layer, ManagedRuntime, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import { Agent, request } from "undici";
import { startEmbeddedPostgres } from "../scripts/stack/postgres.ts";
import { removePostgresData } from "../scripts/stack/postgres-paths.ts";
import { freePort } from "../scripts/stack/wait.ts";
import type { Caller } from "../service/auth/api-keys.ts";
import { databaseLayer } from "../service/db/client.ts";
import { runMigrations } from "../service/db/migrations.ts";
import { DeliveryStore } from "../service/webhooks/delivery-store.ts";
import { dispatcherLayer } from "../service/webhooks/dispatcher.ts";
import { WebhookEndpoints } from "../service/webhooks/endpoints.ts";
import { generateSecretsKey, SecretBox } from "../service/webhooks/secret-box.ts";
import { AttemptSender } from "../service/webhooks/sender.ts";
import { signatureHeader } from "../service/webhooks/signature.ts";
import { startCpuProfile } from "./cpu-profiler.ts";
import { loadPgStatements } from "./pg-statements.ts";
import { cpuBetween, processCpuSeconds, threadCpuSeconds } from "./process-cpu.ts";
import { percentile, percentiles, ratioTo, type SummaryRow, writeResults } from "./report.ts";
import { runSeveral } from "./webhook-runs.ts";
import { makeStageRecorder } from "./webhook-stages.ts";

const EVENTS = Number(process.env.WEBHOOK_BENCH_EVENTS ?? 5000);
const RECEIVERS = Number(process.env.WEBHOOK_BENCH_RECEIVERS ?? 4);
const RATE = Number(process.env.WEBHOOK_BENCH_RATE ?? 2000);
const SECONDS = Number(process.env.WEBHOOK_BENCH_SECONDS ?? 10);
const PER_ENDPOINT = 16;
const TICK_MS = 10;
const PG_STATS = process.env.WEBHOOK_BENCH_PG_STATS === "1";
const WARM = process.env.WEBHOOK_BENCH_WARM !== "0";
const stages = process.env.WEBHOOK_BENCH_STAGES === "1" ? makeStageRecorder() : undefined;

// Several runs by default (bench/webhook-runs.ts); one when profiling, whose output is per run.
const PROFILING = PG_STATS || stages !== undefined || process.env.WEBHOOK_BENCH_CPU_PROF !== undefined;
const RUNS = Number(process.env.WEBHOOK_BENCH_RUNS ?? (PROFILING ? 1 : 3));
const COMMAND = "npm run bench:webhooks";

interface Figures {
  readonly burst: number;
  readonly bareBurst: number;
  /** Unrounded: 0.4988 is a miss. */
  readonly ratio: number;
  readonly p99: number;
  readonly bareP99: number;
  /** A burst counts only with every attempt recorded; the paced figure only if the rate was offered. */
  readonly burstComplete: boolean;
  readonly pacedComplete: boolean;
}

/**
 * The burst's target is its ratio to the bare loop (the ratio of several runs: the median of the runs'
 * ratios). The paced p99 has none: the bare loop's latency is from queueing a request to its receipt,
 * with no outbox insert, wake-up or claim, so it is not the same work, and its ratio is shown only.
 */
function summaryOf(f: Figures, bareWhat: string): SummaryRow[] {
  return [
    {
      what: "webhook deliveries/s, burst",
      figure: f.burst,
      unit: "/s",
      baseline: f.bareBurst,
      baseline_what: bareWhat,
      ratio: Math.round(f.ratio * 1000) / 1000,
      target: "ratio ≥ 0.5",
      meets_target: f.burstComplete && f.ratio >= 0.5,
    },
    {
      what: `webhook paced ${RATE.toLocaleString("en-US")}/s, p99 insert → receipt`,
      figure: f.p99,
      unit: "ms",
      baseline: f.bareP99,
      baseline_what: bareWhat,
      ratio: ratioTo(f.p99, f.bareP99),
      target: null,
      meets_target: null,
    },
  ];
}

function printSummary(summary: ReadonlyArray<SummaryRow>): void {
  console.table(
    summary.map(({ what, figure, unit, baseline, ratio, target, meets_target }) => ({
      what,
      figure,
      unit,
      baseline,
      ratio,
      target,
      meets_target,
    })),
  );
}

if (RUNS > 1) {
  interface Run {
    readonly measured_at: string;
    readonly what: string;
    readonly conditions: string;
    readonly figures: Figures;
  }
  const runs = await runSeveral<Run>(import.meta.filename, RUNS);
  const of = (pick: (f: Figures) => number) =>
    percentile(
      runs.map((run) => pick(run.figures)),
      50,
    );
  const summary = summaryOf(
    {
      burst: of((f) => f.burst),
      bareBurst: of((f) => f.bareBurst),
      ratio: of((f) => f.ratio),
      p99: of((f) => f.p99),
      bareP99: of((f) => f.bareP99),
      burstComplete: runs.every((run) => run.figures.burstComplete),
      pacedComplete: runs.every((run) => run.figures.pacedComplete),
    },
    `bare undici loop, same runs (median of ${RUNS})`,
  );
  writeResults("webhooks", COMMAND, summary, {
    what: runs[0]?.what,
    conditions: `${runs[0]?.conditions}; ${RUNS} runs, each in a fresh process, each figure the median of the runs'`,
    runs,
  });
  console.log(
    `each run's burst ratio: ${runs.map((run) => Math.round(run.figures.ratio * 1000) / 1000).join(", ")}`,
  );
  printSummary(summary);
  process.exit(0);
}

const dataDir = mkdtempSync(join(tmpdir(), "billing-webhook-bench-"));
console.log("starting Postgres and the receivers ...");
const pgOptions = { dataDir: join(dataDir, "pg"), port: await freePort(), database: "bench" };
if (PG_STATS) loadPgStatements();
const postgres = await startEmbeddedPostgres(pgOptions);
const withSql = <A>(url: string, f: (sql: SqlClient.SqlClient) => Effect.Effect<A, unknown>) =>
  Effect.runPromise(
    Effect.scoped(Effect.flatMap(SqlClient.SqlClient, f)).pipe(
      Effect.provide(databaseLayer(url, 1)),
    ) as Effect.Effect<A>,
  );
if (PG_STATS) await withSql(postgres.url, (sql) => sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`);
const topStatements = () =>
  withSql(
    postgres.url,
    (
      sql,
    ) => sql`SELECT calls, round(total_exec_time)::int AS total_ms, round(mean_exec_time::numeric, 3) AS mean_ms,
        rows, left(regexp_replace(query, '\\s+', ' ', 'g'), 160) AS query
      FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 12`,
  );

/** Row versions written to the deliveries table (HOT ones add no index entry), since the stats reset. */
const tableWrites = () =>
  withSql(
    postgres.url,
    (sql) => sql`SELECT relname, n_tup_ins::int AS inserted, n_tup_upd::int AS updated,
        n_tup_hot_upd::int AS hot_updated FROM pg_stat_user_tables
      WHERE relname IN ('webhook_deliveries', 'webhook_attempts') ORDER BY relname`,
  );
const child: ChildProcess = fork(
  "bench/webhook-receivers.ts",
  [String(RECEIVERS), ...(stages ? ["stages"] : [])],
  { stdio: "inherit" },
);
const ask = <T>(type: string): Promise<T> =>
  new Promise((resolve) => {
    const listener = (message: { type: string }) => {
      if (message.type !== type) return;
      child.off("message", listener);
      resolve(message as T);
    };
    child.on("message", listener);
    if (type !== "ready") child.send({ type });
  });
const { ports } = await ask<{ ports: number[] }>("ready");
const urls = ports.map((port) => `http://127.0.0.1:${port}/hooks`);

const waitForCount = async (expected: number, timeoutMs = 300_000) => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { count } = await ask<{ count: number }>("count");
    if (count >= expected) return;
    if (Date.now() > deadline) throw new Error(`only ${count} of ${expected} received`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
};
const report = async () => {
  const { latencies, duplicates } = await ask<{ latencies: number[]; duplicates: number }>("report");
  await ask("reset");
  return { received: latencies.length, duplicates, ...percentiles(latencies) };
};

// ---- the bare loop: undici POSTs, the same concurrency bound per receiver, a signature each ----
const agent = new Agent({ connections: PER_ENDPOINT, keepAliveTimeout: 4000 });
const bareSend = async (url: string, index: number) => {
  const body = JSON.stringify({
    id: `evt_bare_${index}`,
    object: "event",
    type: "bench",
    created: 0,
    livemode: false,
    data: { object: { sent_at: Date.now() } },
  });
  const response = await request(url, {
    method: "POST",
    dispatcher: agent,
    headers: {
      "content-type": "application/json",
      "x-service-signature": signatureHeader(Math.floor(Date.now() / 1000), body, ["whsec_bench"]),
    },
    body,
  });
  await response.body.text();
};
const bareBurst = async () => {
  const cpu = process.cpuUsage();
  const byProcess = otherProcessesCpu();
  const threads = threadCpuSeconds();
  const started = performance.now();
  await Promise.all(
    urls.map(async (url) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: PER_ENDPOINT }, async () => {
          while (next < EVENTS) await bareSend(url, next++);
        }),
      );
    }),
  );
  await waitForCount(EVENTS * RECEIVERS);
  const seconds = (performance.now() - started) / 1000;
  return {
    deliveries: EVENTS * RECEIVERS,
    seconds: round(seconds),
    deliveries_per_second: Math.round((EVENTS * RECEIVERS) / seconds),
    sender_cpu_ms: cpuMs(cpu),
    cpu_seconds: {
      sender: cpuMs(cpu) / 1000,
      sender_threads: cpuBetween(threads, threadCpuSeconds()),
      ...cpuBetween(byProcess, otherProcessesCpu()),
    },
    ...(await report()),
  };
};
/** Paced: every tick, RATE × tick deliveries are queued; each receiver's requests wait for one of its slots. */
const barePaced = async () => {
  const perTick = Math.max(1, Math.round((RATE * TICK_MS) / 1000 / RECEIVERS));
  const queues = urls.map(() => [] as number[]);
  let total = 0;
  let index = 0;
  let done = false;
  const workers = urls.flatMap((url, r) =>
    Array.from({ length: PER_ENDPOINT }, async () => {
      for (;;) {
        const item = queues[r]?.shift();
        if (item === undefined) {
          if (done) return;
          await new Promise((resolve) => setTimeout(resolve, 1));
          continue;
        }
        await bareSend(url, item);
      }
    }),
  );
  const started = performance.now();
  for (let tick = 0; performance.now() - started < SECONDS * 1000; tick++) {
    for (const queue of queues) for (let i = 0; i < perTick; i++) queue.push(index++);
    total += perTick * RECEIVERS;
    const wait = started + (tick + 1) * TICK_MS - performance.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
  done = true;
  await Promise.all(workers);
  await waitForCount(total);
  return { offered_per_second: RATE, deliveries: total, ...(await report()) };
};

// ---- the service's dispatcher ----
const secretsKey = Redacted.make(generateSecretsKey());
const base = Layer.mergeAll(
  databaseLayer(postgres.url, 20),
  SecretBox.layer(secretsKey),
  stages
    ? stages.wrapSender(AttemptSender.layer({ timeoutMs: 10_000, connectionsPerOrigin: PER_ENDPOINT }))
    : AttemptSender.layer({ timeoutMs: 10_000, connectionsPerOrigin: PER_ENDPOINT }),
);
const domain = WebhookEndpoints.layer({ allowPrivateInTest: true }).pipe(
  Layer.provideMerge(stages ? stages.storeLayer : DeliveryStore.layer),
  Layer.provideMerge(base),
  Layer.provideMerge(Layer.effectDiscard(runMigrations).pipe(Layer.provide(base))),
);
const runtime = ManagedRuntime.make(
  Layer.merge(
    domain,
    dispatcherLayer({
      maxInFlight: 256,
      maxInFlightPerEndpoint: PER_ENDPOINT,
      timeoutMs: 10_000,
      allowPrivateInTest: true,
    }).pipe(Layer.provide(domain)),
  ),
);
const merchantId = "mer_bench";
const caller: Caller = { merchantId, apiKeyId: "key_bench", livemode: false, restricted: false };
await runtime.runPromise(
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    yield* sql`INSERT INTO billing.merchants (id, name) VALUES (${merchantId}, 'Bench')`;
    const endpoints = yield* WebhookEndpoints;
    for (const url of urls) yield* endpoints.create(caller, { url, events: ["charge.succeeded"] });
  }),
);
interface InserterResult {
  readonly events: number;
  readonly offered_per_second: number;
  /** CPU time of the run, from "go" to done. */
  readonly cpu_ms: number;
  readonly commits: ReadonlyArray<readonly [string, number]>;
}
/** Forks the inserter and waits until it is connected; `run()` starts it and resolves when it is done. */
const startInserter = (args: string[]) =>
  new Promise<{ run: () => Promise<InserterResult> }>((ready, reject) => {
    const inserter = fork("bench/webhook-inserter.ts", [postgres.url, merchantId, ...args], {
      stdio: "inherit",
    });
    inserter.once("exit", (code) => code !== 0 && reject(new Error(`inserter exited ${code}`)));
    inserter.once("message", () =>
      ready({
        run: () =>
          new Promise((resolve) => {
            inserter.once("message", (message) => resolve(message as InserterResult));
            inserter.send({ type: "go" });
          }),
      }),
    );
  });
const allRecorded = (expected: number) =>
  runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      for (;;) {
        const [row] = yield* sql<{ succeeded: string; attempts: string }>`
          SELECT (SELECT count(*) FROM billing.webhook_deliveries WHERE status = 'succeeded')::text AS succeeded,
                 (SELECT count(*) FROM billing.webhook_attempts)::text AS attempts`;
        if (Number(row?.succeeded) >= expected)
          return { succeeded: Number(row?.succeeded), attempts: Number(row?.attempts) };
        yield* Effect.sleep("5 millis");
      }
    }),
  );
/** `already`: deliveries recorded as succeeded before this burst. */
const dispatcherBurst = async (already: number) => {
  const inserter = await startInserter(["burst", String(EVENTS)]);
  const cpu = process.cpuUsage();
  const byProcess = otherProcessesCpu();
  const threads = threadCpuSeconds();
  const started = performance.now();
  const inserted = await inserter.run();
  const insertedAfter = (performance.now() - started) / 1000;
  await waitForCount(EVENTS * RECEIVERS);
  const receivedAfter = (performance.now() - started) / 1000;
  const recorded = await allRecorded(already + EVENTS * RECEIVERS);
  const seconds = (performance.now() - started) / 1000;
  return {
    deliveries: EVENTS * RECEIVERS,
    seconds: round(seconds),
    deliveries_per_second: Math.round((EVENTS * RECEIVERS) / seconds),
    dispatcher_cpu_ms: cpuMs(cpu),
    inserted_after_seconds: round(insertedAfter),
    received_after_seconds: round(receivedAfter),
    // Postgres's share includes the inserter's events and fan-out as well as the claims and records.
    cpu_seconds: {
      dispatcher: cpuMs(cpu) / 1000,
      dispatcher_threads: cpuBetween(threads, threadCpuSeconds()),
      inserter: inserted.cpu_ms / 1000,
      ...cpuBetween(byProcess, otherProcessesCpu()),
    },
    recorded_succeeded: recorded.succeeded - already,
    recorded_attempts: recorded.attempts - already,
    ...(await report()),
  };
};
const dispatcherPaced = async (already: number) => {
  const inserter = await startInserter(["paced", String(RATE), String(SECONDS), String(RECEIVERS)]);
  stages?.start();
  const { events, offered_per_second, commits } = await inserter.run();
  const total = events * RECEIVERS;
  await waitForCount(total);
  const recorded = await allRecorded(already + total);
  if (stages) {
    const { receipts } = await ask<{ receipts: Array<{ key: string; sentAt: number; receivedAt: number }> }>(
      "receipts",
    );
    const timing = stages.report(receipts, new Map(commits));
    console.log("paced phase, per delivery:");
    console.table(timing.table);
    console.log(JSON.stringify({ ...timing, table: undefined }, null, 1));
  }
  return {
    offered_per_second,
    deliveries: total,
    recorded_succeeded: recorded.succeeded - already,
    ...(await report()),
  };
};
/**
 * CPU seconds of Postgres and the receivers (bench/process-cpu.ts). This process's own is left out: the
 * inserters it reaped land in it (`process.cpuUsage()` and the threads' times are its own alone).
 */
const otherProcessesCpu = () => {
  const { self: _self, ...others } = processCpuSeconds();
  return others;
};
const round = (n: number) => Math.round(n * 100) / 100;
/** CPU time (user + system) this process spent since `since`. */
const cpuMs = (since: NodeJS.CpuUsage) => {
  const { user, system } = process.cpuUsage(since);
  return Math.round((user + system) / 1000);
};

const warmth = WARM ? "warm (one unmeasured burst first)" : "cold";
console.log(`bare loop: ${EVENTS} × ${RECEIVERS} burst (${warmth}), then ${RATE}/s for ${SECONDS} s ...`);
if (WARM) await bareBurst();
const bare = { burst: await bareBurst(), paced: await barePaced() };
console.log(`dispatcher: ${EVENTS} × ${RECEIVERS} burst (${warmth}), then ${RATE}/s for ${SECONDS} s ...`);
const warmedWith = WARM ? (await dispatcherBurst(0)).deliveries : 0;
if (PG_STATS) await withSql(postgres.url, (sql) => sql`SELECT pg_stat_statements_reset(), pg_stat_reset()`);
const CPU_PROFILE = process.env.WEBHOOK_BENCH_CPU_PROF;
const profiler = CPU_PROFILE ? await startCpuProfile() : undefined;
const burst = await dispatcherBurst(warmedWith);
if (PG_STATS) console.table(await topStatements());
if (PG_STATS) console.table(await tableWrites());
if (PG_STATS) await withSql(postgres.url, (sql) => sql`SELECT pg_stat_statements_reset(), pg_stat_reset()`);
const dispatcher = { burst, paced: await dispatcherPaced(warmedWith + burst.deliveries) };
if (PG_STATS) console.table(await topStatements());
if (PG_STATS) console.table(await tableWrites());
if (profiler && CPU_PROFILE) await profiler.stop(CPU_PROFILE);

await runtime.dispose();
await agent.close();
child.send({ type: "exit" });
await postgres.stop();
// As root the data directory lives outside `dataDir` (scripts/stack/postgres-paths.ts): removed with its link.
removePostgresData(pgOptions.dataDir);
rmSync(dataDir, { recursive: true, force: true });

const figures: Figures = {
  burst: dispatcher.burst.deliveries_per_second,
  bareBurst: bare.burst.deliveries_per_second,
  ratio: dispatcher.burst.deliveries_per_second / bare.burst.deliveries_per_second,
  p99: dispatcher.paced.p99_ms,
  bareP99: bare.paced.p99_ms,
  burstComplete: dispatcher.burst.recorded_succeeded === dispatcher.burst.deliveries,
  pacedComplete:
    dispatcher.paced.recorded_succeeded === dispatcher.paced.deliveries &&
    dispatcher.paced.offered_per_second >= 0.95 * RATE,
};
const summary = summaryOf(figures, "bare undici loop, same run");
writeResults(
  "webhooks",
  COMMAND,
  summary,
  {
    what: "webhook deliveries to loopback receivers: the service's dispatcher (outbox insert -> claim -> sign -> POST -> attempt recorded) next to a bare undici POST loop (sign -> POST) to the same receivers",
    conditions: `${RECEIVERS} receivers in a child process, ${PER_ENDPOINT} in flight per receiver on both sides, embedded Postgres 18; bursts ${warmth}; latency = receipt time - outbox insert time (bare: - queue time)`,
    events: EVENTS,
    warm: WARM,
    receivers: RECEIVERS,
    bare,
    dispatcher,
    ratio_burst_throughput: summary[0]?.ratio,
    figures,
  },
  // A run of several (bench/webhook-runs.ts) writes where the first process reads it.
  process.env.WEBHOOK_BENCH_RESULTS,
);
printSummary(summary);
