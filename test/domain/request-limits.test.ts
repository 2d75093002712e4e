/**
 * The API's request rates across processes (service/limits/request-limits.ts): two instances of the
 * limiter on one database stand for two service processes. Together they admit no more than the shared
 * bucket allows, and a key within its rate costs one write to Postgres per lease, not per request.
 */
import { Effect, Layer, ManagedRuntime } from "effect";
import { SqlClient } from "effect/sql";
import { afterAll, beforeAll, expect, it } from "vitest";
import { databaseLayer } from "../../service/db/client.ts";
import { runMigrations } from "../../service/db/migrations.ts";
import {
  type Admission,
  RequestLimits,
  type RequestRateLimits,
} from "../../service/limits/request-limits.ts";
import { freshDatabase } from "./harness.ts";

const LIMITS: RequestRateLimits = { livePerSecond: 100, testPerSecond: 40, testHelpersPerSecond: 0 };

const replica = (url: string) =>
  ManagedRuntime.make(RequestLimits.layer(LIMITS).pipe(Layer.provideMerge(databaseLayer(url, 4))));
type Replica = ReturnType<typeof replica>;

let replicas: readonly Replica[] = [];
beforeAll(async () => {
  const url = await freshDatabase("request_limits");
  await Effect.runPromise(Effect.provide(runMigrations, databaseLayer(url, 1)));
  replicas = [replica(url), replica(url)];
});
afterAll(async () => {
  for (const runtime of replicas) await runtime.dispose();
});

const admit = (runtime: Replica, apiKeyId: string, livemode: boolean) =>
  runtime.runPromise(
    Effect.flatMap(Effect.service(RequestLimits), (limits) => limits.admit(apiKeyId, livemode, "reads")),
  );

const bucketVersion = (runtime: Replica, key: string) =>
  runtime.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.map(
        sql<{
          version: number;
        }>`SELECT version::int AS version FROM billing.request_buckets WHERE key = ${key}`,
        (rows) => rows[0]?.version,
      ),
    ),
  );

it("two processes on one database admit together no more than the bucket's burst plus its rate", async () => {
  const key = "key_two_replicas";
  const started = performance.now();
  const answers = (
    await Promise.all(
      replicas.map((runtime) => Promise.all(Array.from({ length: 150 }, () => admit(runtime, key, false)))),
    )
  ).flat() as Admission[];
  const elapsedSeconds = (performance.now() - started) / 1000;
  const admitted = answers.filter((a) => a.retryAfterSeconds === undefined);
  const refused = answers.filter((a) => a.retryAfterSeconds !== undefined);
  const perSecond = LIMITS.testPerSecond;
  const lease = Math.ceil(perSecond / 10);
  expect(admitted.length).toBeLessThanOrEqual(perSecond + Math.ceil(perSecond * elapsedSeconds));
  // Only a lease's leftover per process may go unused.
  expect(admitted.length).toBeGreaterThanOrEqual(perSecond - replicas.length * lease);
  expect(refused.length).toBeGreaterThan(0);
  for (const answer of refused) {
    expect(answer.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(answer.state).toMatchObject({ limit: perSecond, remaining: 0 });
  }
});

it("a key within its rate costs Postgres one write per lease, not one per request", async () => {
  const [first] = replicas;
  if (first === undefined) throw new Error("no replica");
  const key = "key_within_rate";
  // 50 live reads in a row: a live key's leases hold a tenth of a second's rate (10), within the bucket's 100.
  for (let i = 0; i < 50; i++) expect((await admit(first, key, true))?.retryAfterSeconds).toBeUndefined();
  // The first lease inserts the bucket (version 0); each later one adds 1. Five leases, unless one expired
  // on a slow machine and was taken again.
  const version = await bucketVersion(first, `api:reads:${key}`);
  expect(version).toBeGreaterThanOrEqual(4);
  expect(version).toBeLessThanOrEqual(9);
});

it("a class without a limit is not counted", async () => {
  const [first] = replicas;
  if (first === undefined) throw new Error("no replica");
  const unlimited = await first.runPromise(
    Effect.flatMap(Effect.service(RequestLimits), (limits) =>
      limits.admit("key_helpers", false, "test_helpers"),
    ),
  );
  expect(unlimited).toBeUndefined();
  expect(await bucketVersion(first, "api:test_helpers:key_helpers")).toBeUndefined();
});

it("answers a burst far above the rate at once: the bucket's burst admitted, the rest refused after two takes, not one take per lease", async () => {
  const [first] = replicas;
  if (first === undefined) throw new Error("no replica");
  const key = "key_flood";
  const started = performance.now();
  const answers = (await Promise.all(
    Array.from({ length: 1_000 }, () => admit(first, key, false)),
  )) as Admission[];
  const elapsedSeconds = (performance.now() - started) / 1000;
  const admitted = answers.filter((a) => a.retryAfterSeconds === undefined).length;
  const perSecond = LIMITS.testPerSecond;
  const lease = Math.ceil(perSecond / 10);
  const refilled = Math.ceil(perSecond * elapsedSeconds);
  expect(admitted).toBeGreaterThanOrEqual(perSecond - lease);
  expect(admitted).toBeLessThanOrEqual(perSecond + refilled);
  expect(answers.length - admitted).toBeGreaterThan(900);
  // A lease, then the rest of the burst for the requests waiting (versions 0 and 1), and a lease for
  // each one refilled meanwhile at most: a take per lease until the bucket ran dry (ten here) would mean
  // the flood's requests waited through them.
  expect(await bucketVersion(first, `api:reads:${key}`)).toBeLessThanOrEqual(1 + Math.ceil(refilled / lease));
});
