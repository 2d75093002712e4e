/**
 * `node bench/request-limits.ts`: what the API's request limiter (service/limits/request-limits.ts) costs
 * a request, alone: one key's admissions in a loop on an embedded Postgres, within its rate (tokens from
 * the process's lease, a database round trip per lease) and beyond it (refused from memory), with the
 * `RateLimit-*` headers built for each. Prints µs per admission and the round trips per 1,000 (from the
 * bucket's version). `bench:api` measures it in place, among everything else a request does.
 */
import { join } from "node:path";
import { Effect, Layer, ManagedRuntime } from "effect";
import { SqlClient } from "effect/sql";
import { startEmbeddedPostgres } from "../scripts/stack/postgres.ts";
import { scratchDir } from "../scripts/stack/scratch-stack.ts";
import { freePort } from "../scripts/stack/wait.ts";
import { databaseLayer } from "../service/db/client.ts";
import { runMigrations } from "../service/db/migrations.ts";
import { rateLimitHeaders } from "../service/http/rate-limits.ts";
import { RequestLimits } from "../service/limits/request-limits.ts";

const ADMISSIONS = Number(process.env.LIMITER_ADMISSIONS ?? 200_000);

const scratch = scratchDir("limiter", []);
const postgres = await startEmbeddedPostgres({
  dataDir: join(scratch.dataDir, "postgres"),
  port: await freePort(),
  database: "limiter",
});
try {
  const database = databaseLayer(postgres.url, 4);
  await Effect.runPromise(Effect.provide(runMigrations, database));
  for (const perSecond of [1_000_000, 100]) {
    const runtime = ManagedRuntime.make(
      RequestLimits.layer({
        livePerSecond: perSecond,
        testPerSecond: perSecond,
        testHelpersPerSecond: 0,
      }).pipe(Layer.provideMerge(database)),
    );
    const limits = await runtime.runPromise(Effect.service(RequestLimits));
    const key = `key_${perSecond}`;
    const loop = Effect.gen(function* () {
      let refused = 0;
      for (let i = 0; i < ADMISSIONS; i++) {
        const admission = yield* limits.admit(key, true, "reads");
        rateLimitHeaders(admission?.state);
        if (admission?.retryAfterSeconds !== undefined) refused++;
      }
      return refused;
    });
    await runtime.runPromise(loop); // warm-up
    const started = performance.now();
    const refused = await runtime.runPromise(loop);
    const micros = ((performance.now() - started) * 1000) / ADMISSIONS;
    const [bucket] = await runtime.runPromise(
      Effect.flatMap(
        SqlClient.SqlClient,
        (sql) => sql<{ version: number }>`SELECT version::int AS version FROM billing.request_buckets
          WHERE key = ${`api:reads:${key}`}`,
      ),
    );
    console.log(
      `${perSecond} a second: ${micros.toFixed(3)} µs an admission, ${refused} of ${ADMISSIONS} refused, ` +
        `${(((bucket?.version ?? 0) + 1) * 1000) / (2 * ADMISSIONS)} leases per 1,000 admissions`,
    );
    await runtime.dispose();
  }
} finally {
  await postgres.stop();
  scratch.remove();
}
