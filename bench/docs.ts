/**
 * `npm run bench:docs`: the memory of the documentation routes under repeated anonymous requests. For
 * each of `/v1/openapi.json`, `/docs` and Scalar's 4.35 MB bundle, a fresh server process
 * (bench/docs-server.ts: the routes as the service registers them) answers DOCS_REQUESTS (default
 * 2,000) requests, 16 at a time, their Accept-Encoding rotating over a browser's (brotli), gzip only and
 * identity, every body read to its end. Its resident memory (VmRSS, and the peak VmHWM, from /proc) is
 * read after the first DOCS_WARMUP (default 100) and after the last: the target is growth of at most
 * 10% between the two, in the same run (a route that encoded or copied its bytes per request grows with
 * the requests in flight and the garbage left behind).
 *
 * Writes bench/results/docs.json (another count: docs-<N>.json).
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Agent, request } from "undici";
import { BUNDLE_PATH } from "../service/http/api-reference.ts";
import { ratioTo, type SummaryRow, writeResults } from "./report.ts";

const REQUESTS = Number(process.env.DOCS_REQUESTS ?? 2000);
const WARMUP = Number(process.env.DOCS_WARMUP ?? 100);
const CONCURRENCY = 16;
const GROWTH_TARGET = 1.1;
const ENCODINGS = ["gzip, deflate, br, zstd", "gzip", "identity"] as const;

const scalarVersion = (
  JSON.parse(readFileSync("node_modules/@scalar/api-reference/package.json", "utf8")) as { version: string }
).version;
const ROUTES = [
  { what: "/v1/openapi.json", path: "/v1/openapi.json" },
  { what: "/docs", path: "/docs" },
  { what: "Scalar's bundle", path: `${BUNDLE_PATH}?v=${scalarVersion}` },
] as const;

/** VmRSS and VmHWM of a process, in MB, from /proc (Linux). */
const memoryOf = (pid: number) => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1]) / 1024;
  return { rss_mb: Math.round(field("VmRSS") * 10) / 10, peak_mb: Math.round(field("VmHWM") * 10) / 10 };
};

const startServer = () =>
  new Promise<{ url: string; pid: number; stop: () => Promise<void> }>((resolve, reject) => {
    const child = spawn(process.execPath, ["bench/docs-server.ts"], { stdio: ["ignore", "pipe", "inherit"] });
    const exited = new Promise<void>((done) => child.once("exit", () => done()));
    child.once("exit", (code) => reject(new Error(`docs server exited ${code} before listening`)));
    child.stdout.on("data", (chunk: Buffer) => {
      const port = /listening (\d+)/.exec(chunk.toString())?.[1];
      if (port && child.pid !== undefined)
        resolve({
          url: `http://127.0.0.1:${port}`,
          pid: child.pid,
          stop: async () => {
            child.kill("SIGTERM");
            await exited;
          },
        });
    });
  });

/** Sends requests `from` to `to` (exclusive), CONCURRENCY at a time; the bytes received. */
const send = async (dispatcher: Agent, url: string, from: number, to: number) => {
  let next = from;
  let bytes = 0;
  const worker = async () => {
    for (let i = next++; i < to; i = next++) {
      const answer = await request(url, {
        dispatcher,
        headers: { "accept-encoding": ENCODINGS[i % ENCODINGS.length] ?? "identity" },
      });
      for await (const chunk of answer.body) bytes += (chunk as Buffer).byteLength;
      if (answer.statusCode !== 200) throw new Error(`${url}: ${answer.statusCode}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return bytes;
};

const measured = [];
for (const route of ROUTES) {
  const server = await startServer();
  const dispatcher = new Agent({ connections: CONCURRENCY });
  try {
    const url = `${server.url}${route.path}`;
    const started = performance.now();
    const warmupBytes = await send(dispatcher, url, 0, WARMUP);
    const afterWarmup = memoryOf(server.pid);
    const restBytes = await send(dispatcher, url, WARMUP, REQUESTS);
    const afterAll = memoryOf(server.pid);
    const seconds = (performance.now() - started) / 1000;
    measured.push({
      ...route,
      requests: REQUESTS,
      megabytes_sent: Math.round(((warmupBytes + restBytes) / 1e6) * 10) / 10,
      seconds: Math.round(seconds * 10) / 10,
      after_warmup: afterWarmup,
      after_all: afterAll,
    });
    console.log(
      `${route.what}: RSS ${afterWarmup.rss_mb} → ${afterAll.rss_mb} MB, peak ${afterWarmup.peak_mb} → ${afterAll.peak_mb} MB`,
    );
  } finally {
    await dispatcher.close();
    await server.stop();
  }
}

const summary: SummaryRow[] = measured.flatMap((m) =>
  (["rss_mb", "peak_mb"] as const).map((field) => ({
    what: `docs ${field === "rss_mb" ? "RSS" : "peak RSS"} after ${m.requests.toLocaleString("en-US")} requests, ${m.what}`,
    figure: m.after_all[field],
    unit: "MB",
    baseline: m.after_warmup[field],
    baseline_what: `after the first ${WARMUP}`,
    ratio: ratioTo(m.after_all[field], m.after_warmup[field]),
    target: `ratio ≤ ${GROWTH_TARGET}`,
    meets_target: m.after_all[field] <= GROWTH_TARGET * m.after_warmup[field],
  })),
);
writeResults(REQUESTS === 2000 ? "docs" : `docs-${REQUESTS}`, "npm run bench:docs", summary, {
  requests: REQUESTS,
  warmup: WARMUP,
  concurrency: CONCURRENCY,
  encodings: ENCODINGS,
  routes: measured,
});
