/**
 * The load generator of `npm run bench:api`, run as its own process so that it never shares an event
 * loop with the server it measures. Reads one job (JSON) from argv, runs autocannon, and prints one JSON
 * line: requests/s, latency percentiles and every non-2xx answer or error counted.
 *
 * A job's `paths` rotate per request (GET by id over many mandates); `fresh_idempotency_key` gives every
 * request its own Idempotency-Key (a POST that must create, never replay).
 */
import { randomUUID } from "node:crypto";
import autocannon from "autocannon";

interface LoadJob {
  readonly url: string;
  readonly method: "GET" | "POST";
  readonly paths: readonly string[];
  readonly headers: Record<string, string>;
  readonly body?: string;
  readonly fresh_idempotency_key?: boolean;
  readonly connections: number;
  readonly seconds: number;
}

const job = JSON.parse(process.argv[2] ?? "{}") as LoadJob;
let next = 0;

const result = await autocannon({
  url: job.url,
  connections: job.connections,
  duration: job.seconds,
  pipelining: 1,
  requests: [
    {
      method: job.method,
      headers: job.headers,
      ...(job.body === undefined ? {} : { body: job.body }),
      setupRequest: (request) => {
        const path = job.paths[next++ % job.paths.length] ?? "/";
        return job.fresh_idempotency_key
          ? { ...request, path, headers: { ...request.headers, "idempotency-key": randomUUID() } }
          : { ...request, path };
      },
    },
  ],
});

process.stdout.write(
  `${JSON.stringify({
    requests_per_second: result.requests.average,
    requests: result.requests.total,
    p50_ms: result.latency.p50,
    p90_ms: result.latency.p90,
    p99_ms: result.latency.p99,
    max_ms: result.latency.max,
    non_2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
  })}\n`,
);
