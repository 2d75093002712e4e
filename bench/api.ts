/**
 * `npm run bench:api`: three API routes under 32 concurrent connections (autocannon), each beside a
 * baseline of bare Hono doing the same database work per request, in the same run, on the same embedded
 * Postgres:
 * - `GET /v1/mandates/{id}` (ids rotate over API_MANDATES mandates, default 500),
 * - `GET /v1/mandates?limit=10`,
 * - `POST /v1/mandates` with a fresh Idempotency-Key per request.
 *
 * The service runs in this process (the scratch stack's: Postgres, anvil, Ponder, the service with its
 * workers); the baseline (bench/api-baseline.ts) and autocannon (bench/api-load.ts) each run in a process
 * of their own, so the load generator never shares an event loop with what it measures. Each route is
 * warmed up (API_WARMUP_S, default 2 s) and measured for API_SECONDS (default 10) on the service, then on
 * the baseline, in API_ROUNDS (default 2) alternating slices each. Any non-2xx answer or connection
 * error fails the bench.
 *
 * Profiling: API_CPU_PROFILE=<dir> writes a CPU profile of this (the service's) process for each
 * measured service run (`node:inspector`, only the measured seconds), and one of the baseline's whole
 * run (`--cpu-prof`, in <dir>/baseline), summarised by
 * bench/cpu-profile.ts; API_PG_STATS=1 starts Postgres with pg_stat_statements loaded and
 * records, per run, the statements executed per request and their mean time. Every slice records the CPU
 * time per request of the process that answered (user + system: the service's is this process's, the
 * baseline's its own, read from /proc), the figure that decides the ratio on a machine whose cores are
 * shared with the load generator and Postgres.
 *
 * Writes bench/results/api.json.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { PgClient } from "@effect/sql-pg";
import { Effect, ManagedRuntime, Redacted } from "effect";
import { startScratchStack, stopOnSignal } from "../scripts/stack/scratch-stack.ts";
import type { BaselineConfig } from "./api-baseline.ts";
import { startCpuProfile } from "./cpu-profiler.ts";
import { benchChain } from "./local-chain-config.ts";
import { loadPgStatements } from "./pg-statements.ts";
import { ratioTo, type SummaryRow, writeResults } from "./report.ts";

const MANDATES = Number(process.env.API_MANDATES ?? 500);
const SECONDS = Number(process.env.API_SECONDS ?? 10);
const WARMUP_SECONDS = Number(process.env.API_WARMUP_S ?? 2);
const ROUNDS = Number(process.env.API_ROUNDS ?? 2);
const CONNECTIONS = 32;
const POOL_SIZE = 20;
const CPU_PROFILE_DIR = process.env.API_CPU_PROFILE;
const PG_STATS = process.env.API_PG_STATS === "1";
/** The service's req/s over the bare baseline's, same run (issue 20). */
const RATIO_TARGET = 0.6;
/**
 * The single read's p99 over the baseline's, same run: about the reciprocal of RATIO_TARGET, the same
 * allowance for time per request as for throughput.
 */
const P99_RATIO_TARGET = 1.7;

interface LoadResult {
  readonly requests_per_second: number;
  readonly requests: number;
  readonly p50_ms: number;
  readonly p90_ms: number;
  readonly p99_ms: number;
  readonly max_ms: number;
  readonly non_2xx: number;
  readonly errors: number;
  readonly timeouts: number;
}

interface Job {
  readonly method: "GET" | "POST";
  readonly paths: readonly string[];
  readonly body?: string;
  readonly fresh_idempotency_key?: boolean;
}

/** Runs autocannon in its own process against `url`. */
const load = (url: string, headers: Record<string, string>, job: Job, seconds: number) =>
  new Promise<LoadResult>((resolve, reject) => {
    const child = spawn(
      process.execPath,
      ["bench/api-load.ts", JSON.stringify({ url, headers, connections: CONNECTIONS, seconds, ...job })],
      { stdio: ["ignore", "pipe", "inherit"] },
    );
    let out = "";
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.once("exit", (code) =>
      code === 0 ? resolve(JSON.parse(out) as LoadResult) : reject(new Error(`autocannon exited ${code}`)),
    );
  });

/** CPU time (user + system, µs) a child process has used so far, from /proc (Linux); undefined elsewhere. */
const childCpuMicros = (pid: number | undefined): number | undefined => {
  if (pid === undefined) return undefined;
  try {
    // Fields after the command name (which may hold spaces): utime and stime are the 12th and 13th.
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? (ticks * 1e6) / CLOCK_TICKS_PER_SECOND : undefined;
  } catch {
    return undefined;
  }
};
/** Linux's USER_HZ, what /proc/<pid>/stat counts in, on every architecture Node runs on. */
const CLOCK_TICKS_PER_SECOND = 100;
const ownCpuMicros = () => {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
};

const startBaseline = (config: BaselineConfig) =>
  new Promise<{ url: string; cpuMicros: () => number | undefined; stop: () => Promise<void> }>(
    (resolve, reject) => {
      // Profiled with the service, the baseline's whole life (every route, warm-ups included) is profiled too.
      const profile = CPU_PROFILE_DIR ? ["--cpu-prof", `--cpu-prof-dir=${CPU_PROFILE_DIR}/baseline`] : [];
      const child = spawn(process.execPath, [...profile, "bench/api-baseline.ts", JSON.stringify(config)], {
        stdio: ["ignore", "pipe", "inherit"],
      });
      const exited = new Promise<void>((done) => child.once("exit", () => done()));
      child.once("exit", (code) => reject(new Error(`baseline exited ${code} before listening`)));
      child.stdout.on("data", (chunk: Buffer) => {
        const port = /listening (\d+)/.exec(chunk.toString())?.[1];
        if (port)
          resolve({
            url: `http://127.0.0.1:${port}`,
            cpuMicros: () => childCpuMicros(child.pid),
            stop: async () => {
              child.kill("SIGTERM");
              await exited;
            },
          });
      });
    },
  );

const round = (value: number, digits = 1) => Math.round(value * 10 ** digits) / 10 ** digits;

/**
 * Slices of one target as one figure: requests/s over all of them, p50 their mean, p99 and max the
 * worst slice's (autocannon reports percentiles per run, not histograms that could be merged).
 */
const combine = (results: ReadonlyArray<LoadResult>): LoadResult => {
  const sum = (f: (r: LoadResult) => number) => results.reduce((total, r) => total + f(r), 0);
  const worst = (f: (r: LoadResult) => number) => Math.max(...results.map(f));
  return {
    requests_per_second: sum((r) => r.requests_per_second) / results.length,
    requests: sum((r) => r.requests),
    p50_ms: round(sum((r) => r.p50_ms) / results.length),
    p90_ms: round(sum((r) => r.p90_ms) / results.length),
    p99_ms: worst((r) => r.p99_ms),
    max_ms: worst((r) => r.max_ms),
    non_2xx: sum((r) => r.non_2xx),
    errors: sum((r) => r.errors),
    timeouts: sum((r) => r.timeouts),
  };
};

console.log("starting the stack ...");
if (PG_STATS) loadPgStatements();
const scratch = await startScratchStack("api", { chains: [benchChain("api")] });
const { stack } = scratch;
stopOnSignal(scratch);
let stopBaseline: (() => Promise<void>) | undefined;
try {
  const key = stack.devMerchant.apiKey;
  const auth = { authorization: `Bearer ${key}` };
  const database = ManagedRuntime.make(
    PgClient.layer({ url: Redacted.make(stack.databaseUrl), maxConnections: 2 }),
  );
  const query = <A extends object>(
    run: (sql: PgClient.PgClient) => Effect.Effect<ReadonlyArray<A>, unknown>,
  ) => database.runPromise(Effect.flatMap(Effect.service(PgClient.PgClient), run));

  if (PG_STATS) await query((sql) => sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`);

  const createBody = (i: number) =>
    JSON.stringify({ cap_decimal: "25.00", period: "month", customer: `cus_bench_${i}` });
  const post = async (body: string) => {
    const response = await fetch(`${stack.apiUrl}/v1/mandates`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json", "idempotency-key": crypto.randomUUID() },
      body,
    });
    const json = (await response.json()) as { id: string; chain: number; token_address: string };
    if (response.status !== 200 && response.status !== 201)
      throw new Error(`POST /v1/mandates: ${response.status} ${JSON.stringify(json)}`);
    return json;
  };
  console.log(`creating ${MANDATES} mandates ...`);
  const ids: string[] = [];
  for (let i = 0; i < MANDATES; i += 16)
    ids.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(16, MANDATES - i) }, (_, j) =>
          post(createBody(i + j)).then((m) => m.id),
        ),
      )),
    );
  const [terms] = await query<{
    merchant_id: string;
    api_key_id: string;
    chain_id: number;
    token_address: string;
    payee_address: string;
    operator_address: string;
  }>(
    (sql) => sql`SELECT m.merchant_id, k.id AS api_key_id, m.chain_id::int AS chain_id, m.token_address,
        m.payee_address, m.operator_address
      FROM billing.mandates m JOIN billing.api_keys k ON k.merchant_id = m.merchant_id AND k.revoked_at IS NULL
      WHERE m.id = ${ids[0] ?? ""} LIMIT 1`,
  );
  if (terms === undefined) throw new Error("no mandate to copy terms from");
  const baseline = await startBaseline({
    databaseUrl: stack.databaseUrl,
    poolSize: POOL_SIZE,
    merchantId: terms.merchant_id,
    apiKeyId: terms.api_key_id,
    terms: {
      chain_id: terms.chain_id,
      token_address: terms.token_address,
      payee_address: terms.payee_address,
      operator_address: terms.operator_address,
    },
  });
  stopBaseline = baseline.stop;

  const routes: ReadonlyArray<{ readonly name: string; readonly what: string; readonly job: Job }> = [
    {
      name: "get",
      what: "GET /v1/mandates/{id}",
      job: { method: "GET", paths: ids.map((id) => `/v1/mandates/${id}`) },
    },
    {
      name: "list",
      what: "GET /v1/mandates?limit=10",
      job: { method: "GET", paths: ["/v1/mandates?limit=10"] },
    },
    {
      name: "post",
      what: "POST /v1/mandates",
      job: { method: "POST", paths: ["/v1/mandates"], body: createBody(0), fresh_idempotency_key: true },
    },
  ];

  const statements = async (requests: number) => {
    if (!PG_STATS) return undefined;
    const rows = await query<{ query: string; calls: string; mean_ms: number; total_ms: number }>(
      (sql) => sql`SELECT query, calls::text AS calls, mean_exec_time AS mean_ms, total_exec_time AS total_ms
        FROM pg_stat_statements WHERE calls >= ${Math.max(1, Math.floor(requests / 20))}
        ORDER BY total_exec_time DESC LIMIT 15`,
    );
    return rows.map((row) => ({
      per_request: round(Number(row.calls) / requests, 2),
      mean_ms: round(row.mean_ms, 3),
      total_ms: round(row.total_ms, 0),
      query: row.query.replace(/\s+/g, " ").slice(0, 300),
    }));
  };
  const resetStatements = () =>
    PG_STATS
      ? query((sql) => sql`SELECT pg_stat_statements_reset()`).then(() => undefined)
      : Promise.resolve();

  const measured: Record<string, unknown> = {};
  const summary: SummaryRow[] = [];
  for (const route of routes) {
    const headers = {
      ...auth,
      ...(route.job.body === undefined ? {} : { "content-type": "application/json" }),
    };
    const targets = [
      ["service", stack.apiUrl, ownCpuMicros],
      ["baseline", baseline.url, baseline.cpuMicros],
    ] as const;
    for (const [, url] of targets) await load(url, headers, route.job, WARMUP_SECONDS);
    // Service and baseline take turns, ROUNDS slices each: load from other processes on the machine
    // drifts, and alternating spreads it over both.
    const slices: Record<
      string,
      Array<LoadResult & { cpu_us_per_request?: number; statements?: unknown }>
    > = {
      service: [],
      baseline: [],
    };
    for (let slice = 0; slice < ROUNDS; slice++)
      for (const [target, url, cpuMicros] of targets) {
        await resetStatements();
        const profiler =
          CPU_PROFILE_DIR && target === "service" && slice === 0 ? await startCpuProfile() : undefined;
        const cpuBefore = cpuMicros();
        const result = await load(url, headers, route.job, SECONDS / ROUNDS);
        const cpuAfter = cpuMicros();
        await profiler?.stop(`${CPU_PROFILE_DIR}/api-${route.name}.cpuprofile`);
        if (result.non_2xx > 0 || result.errors > 0 || result.timeouts > 0)
          throw new Error(`${route.what} on the ${target}: ${JSON.stringify(result)}`);
        const stats = await statements(result.requests);
        const cpu =
          cpuBefore === undefined || cpuAfter === undefined || result.requests === 0
            ? undefined
            : round((cpuAfter - cpuBefore) / result.requests, 0);
        slices[target]?.push({
          ...result,
          ...(cpu === undefined ? {} : { cpu_us_per_request: cpu }),
          ...(stats ? { statements: stats } : {}),
        });
        console.log(
          `${route.what} ${target} (${slice + 1}/${ROUNDS}): ${round(result.requests_per_second, 0)} req/s, p50 ${result.p50_ms} ms, p99 ${result.p99_ms} ms${cpu === undefined ? "" : `, CPU ${cpu} µs/request`}`,
        );
      }
    const runs = Object.fromEntries(
      Object.entries(slices).map(([target, results]) => {
        const cpu = results.map((r) => r.cpu_us_per_request).filter((c) => c !== undefined);
        return [
          target,
          {
            ...combine(results),
            ...(cpu.length === results.length
              ? { cpu_us_per_request: round(cpu.reduce((a, b) => a + b, 0) / cpu.length, 0) }
              : {}),
          },
        ];
      }),
    ) as Record<"service" | "baseline", LoadResult & { cpu_us_per_request?: number }>;
    const service = runs.service;
    const base = runs.baseline;
    const ratio = service.requests_per_second / base.requests_per_second;
    measured[route.name] = { what: route.what, ratio: round(ratio, 3), ...runs, slices };
    summary.push({
      what: `${route.what}, ${CONNECTIONS} connections, req/s`,
      figure: round(service.requests_per_second, 0),
      unit: "req/s",
      baseline: round(base.requests_per_second, 0),
      baseline_what: "bare Hono + @effect/sql-pg, same database work, same run",
      ratio: round(ratio, 3),
      target: `ratio ≥ ${RATIO_TARGET}`,
      meets_target: ratio >= RATIO_TARGET,
    });
    if (route.name === "get")
      summary.push({
        what: `${route.what}, ${CONNECTIONS} connections, p99`,
        figure: service.p99_ms,
        unit: "ms",
        baseline: base.p99_ms,
        baseline_what: "bare Hono + @effect/sql-pg, same run",
        ratio: ratioTo(service.p99_ms, base.p99_ms),
        target: `ratio ≤ ${P99_RATIO_TARGET}`,
        meets_target: service.p99_ms <= P99_RATIO_TARGET * base.p99_ms,
      });
    if (route.name === "post")
      summary.push({
        what: `${route.what}, ${CONNECTIONS} connections, p50`,
        figure: service.p50_ms,
        unit: "ms",
        baseline: base.p50_ms,
        baseline_what: "bare Hono + @effect/sql-pg, same run",
        ratio: ratioTo(service.p50_ms, base.p50_ms),
        target: null,
        meets_target: null,
      });
  }
  writeResults("api", "npm run bench:api", summary, {
    parameters: {
      connections: CONNECTIONS,
      seconds: SECONDS,
      warmup_seconds: WARMUP_SECONDS,
      rounds: ROUNDS,
      mandates: MANDATES,
      pool_size: POOL_SIZE,
      pg_stat_statements: PG_STATS,
    },
    routes: measured,
  });
  console.table(
    summary.map((row) => ({
      what: row.what,
      figure: row.figure,
      baseline: row.baseline,
      ratio: row.ratio,
      meets: row.meets_target,
    })),
  );
  await database.dispose();
} finally {
  await stopBaseline?.();
  await scratch.stop();
}
