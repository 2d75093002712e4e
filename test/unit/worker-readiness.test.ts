import { PgClient } from "@effect/sql-pg";
import { describe, expect, it } from "@effect/vitest";
import { Context, Duration, Effect, Layer, Logger, Ref } from "effect";
import { SqlError } from "effect/sql";
import { TestClock } from "effect/testing";
import { runWorkers, Workers } from "../../service/workers/runtime.ts";
import { staleAfter, type Worker } from "../../service/workers/worker.ts";

// The workers below have no `wakeOn`, so the Postgres client is never touched; the layer's type asks for it.
const unusedPg = Layer.succeed(PgClient.PgClient, {} as PgClient.PgClient);
const quiet = Logger.layer([]);

const connectionLost = new SqlError.SqlError({
  reason: new SqlError.ConnectionError({
    cause: new Error("connection refused"),
    message: "connection lost",
  }),
});

describe("worker readiness", () => {
  it("is three intervals plus 30 s", () => {
    expect(Duration.toMillis(staleAfter("1 second"))).toBe(33_000);
    expect(Duration.toMillis(staleAfter("10 minutes"))).toBe(1_830_000);
  });

  it.effect("a worker whose pass keeps failing makes readiness false, naming it; a success restores it", () =>
    Effect.gen(function* () {
      const healthy = yield* Ref.make(false);
      const flaky: Worker<never> = {
        name: "flaky",
        interval: "1 second",
        pass: Effect.flatMap(Ref.get(healthy), (ok) => (ok ? Effect.void : Effect.fail(connectionLost))),
      };
      const steady: Worker<never> = { name: "steady", interval: "1 second", pass: Effect.void };
      const context = yield* Layer.build(
        runWorkers([flaky, steady]).pipe(Layer.provide(Layer.merge(unusedPg, quiet))),
      );
      const workers = Context.get(context, Workers);

      expect(yield* workers.status).toEqual({ ready: true, stale: [] });
      // Its start counts as a success: still within 3 × 1 s + 30 s.
      yield* TestClock.adjust("33 seconds");
      expect(yield* workers.status).toEqual({ ready: true, stale: [] });
      yield* TestClock.adjust("2 seconds");
      expect(yield* workers.status).toEqual({ ready: false, stale: ["flaky"] });
      expect(yield* workers.ready).toBe(false);

      yield* Ref.set(healthy, true);
      yield* TestClock.adjust("1 second");
      expect(yield* workers.status).toEqual({ ready: true, stale: [] });

      // Failing again: not ready once its last success is older than the bound.
      yield* Ref.set(healthy, false);
      yield* TestClock.adjust("30 seconds");
      expect(yield* workers.ready).toBe(true);
      yield* TestClock.adjust("4 seconds");
      expect(yield* workers.status).toEqual({ ready: false, stale: ["flaky"] });
    }),
  );
});
