/**
 * Idempotency-Key records of a transactional handler (written once, after the handler, with the reply):
 * a duplicate runs the handler too and rolls it back; a run that fails on our side is run again with the
 * record first, so it replays a reply another request holds or answers as the request that took the key.
 */
import { expect, layer } from "@effect/vitest";
import { Data, Deferred, Effect, Exit, Fiber, Layer } from "effect";
import { SqlClient } from "effect/sql";
import { ApiKeys } from "../../service/auth/api-keys.ts";
import { Idempotency, type Reply } from "../../service/idempotency/idempotency.ts";
import { Merchants } from "../../service/merchants/merchants.ts";
import { domainTestLayer, fakeChain, freshDatabase, lockWaits } from "./harness.ts";

const testLayer = Layer.unwrap(
  Effect.promise(async () => domainTestLayer(await freshDatabase("idempotency"), fakeChain(2_000_000_000))),
);

/** A failure on our side (never stored). */
class Outage extends Data.TaggedError("Outage") {}
const notStorable = () => undefined;

const request = (key: string, body: unknown = { n: 1 }) => ({
  key,
  method: "POST",
  path: "/v1/things",
  body,
});

layer(testLayer, { timeout: 60_000 })("idempotency, transactional handler", (it) => {
  const setUp = Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const merchant = yield* (yield* Merchants).create("Shop");
    const { record } = yield* (yield* ApiKeys).create({ merchantId: merchant.id, livemode: false });
    yield* sql`CREATE TABLE IF NOT EXISTS public.idempotency_effects (key text)`;
    /** A handler whose one effect is a row of `key`, answering `body`. */
    const writing = (key: string, body: string) =>
      Effect.as(sql`INSERT INTO public.idempotency_effects (key) VALUES (${key})`, {
        status: 200,
        bodyText: body,
      } satisfies Reply);
    const effects = (key: string) =>
      Effect.map(
        sql<{ n: number }>`SELECT count(*)::int AS n FROM public.idempotency_effects WHERE key = ${key}`,
        (rows) => rows[0]?.n,
      );
    const idempotency = yield* Idempotency;
    /**
     * The first request of `key`, forked: its handler has started when this returns and finishes when
     * `release` is called. Record-first by default; reply-last with `transactional`.
     */
    const firstRunning = (key: string, options?: { readonly transactional: boolean }) =>
      Effect.gen(function* () {
        const release = yield* Deferred.make<void>();
        const started = yield* Deferred.make<void>();
        const fiber = yield* Effect.forkChild(
          idempotency.run(
            record.id,
            request(key),
            writing(key, "first").pipe(
              Effect.tap(() => Deferred.succeed(started, undefined)),
              Effect.tap(() => Deferred.await(release)),
            ),
            notStorable,
            options,
          ),
        );
        yield* Deferred.await(started);
        return { fiber, release: Deferred.succeed(release, undefined) };
      });
    return { apiKeyId: record.id, idempotency, writing, effects, firstRunning };
  });

  it.effect("a duplicate failing on our side waits for the key's holder and replays its reply", () =>
    Effect.gen(function* () {
      const { apiKeyId, idempotency, effects, firstRunning } = yield* setUp;
      const key = "held";
      // The first takes the key before its handler runs (the record-first order) and holds it.
      const first = yield* firstRunning(key);
      const duplicate = yield* Effect.forkChild(
        idempotency.run(apiKeyId, request(key), Effect.fail(new Outage()), notStorable, {
          transactional: true,
        }),
      );
      // The duplicate failed on our side and, run again with the record first, waits on the key's row.
      yield* lockWaits(1);
      yield* first.release;
      expect(yield* Fiber.join(first.fiber)).toEqual({ status: 200, bodyText: "first", replayed: false });
      expect(yield* Fiber.join(duplicate)).toEqual({ status: 200, bodyText: "first", replayed: true });
      expect(yield* effects(key)).toBe(1);
    }),
  );

  it.effect("a duplicate failing on our side before anyone holds the key answers as the key's taker", () =>
    Effect.gen(function* () {
      const { apiKeyId, idempotency, effects, firstRunning } = yield* setUp;
      const key = "unheld";
      // The first runs reply-last: it holds nothing while its handler runs.
      const first = yield* firstRunning(key, { transactional: true });
      // The duplicate takes the key, fails, stores nothing: a request that took the key and failed.
      const duplicate = yield* Effect.exit(
        idempotency.run(apiKeyId, request(key), Effect.fail(new Outage()), notStorable, {
          transactional: true,
        }),
      );
      expect(Exit.isFailure(duplicate) && duplicate.cause.toString()).toContain("Outage");
      yield* first.release;
      expect(yield* Fiber.join(first.fiber)).toEqual({ status: 200, bodyText: "first", replayed: false });
      expect(yield* effects(key)).toBe(1);
    }),
  );

  it.effect(
    "a duplicate that succeeds too rolls its effect back and replays; a failure alone is not stored",
    () =>
      Effect.gen(function* () {
        const { apiKeyId, idempotency, writing, effects } = yield* setUp;
        const key = "done";
        const run = (body: string) =>
          idempotency.run(apiKeyId, request(key), writing(key, body), notStorable, { transactional: true });
        expect(yield* run("first")).toEqual({ status: 200, bodyText: "first", replayed: false });
        expect(yield* run("second")).toEqual({ status: 200, bodyText: "first", replayed: true });
        expect(yield* effects(key)).toBe(1);

        const failing = yield* Effect.exit(
          idempotency.run(apiKeyId, request("failing"), Effect.fail(new Outage()), notStorable, {
            transactional: true,
          }),
        );
        expect(Exit.isFailure(failing) && failing.cause.toString()).toContain("Outage");
        // Nothing was stored, so the same key runs again.
        expect(
          yield* idempotency.run(apiKeyId, request("failing"), writing("failing", "later"), notStorable, {
            transactional: true,
          }),
        ).toEqual({ status: 200, bodyText: "later", replayed: false });
      }),
  );

  it.effect("a failing duplicate with another body gets the 409", () =>
    Effect.gen(function* () {
      const { apiKeyId, idempotency, writing } = yield* setUp;
      const key = "reused";
      yield* idempotency.run(apiKeyId, request(key), writing(key, "first"), notStorable, {
        transactional: true,
      });
      const reused = yield* Effect.flip(
        idempotency.run(apiKeyId, request(key, { n: 2 }), Effect.fail(new Outage()), notStorable, {
          transactional: true,
        }),
      );
      expect(reused).toMatchObject({ code: "idempotency_key_reused", status: 409 });
    }),
  );
});
