/**
 * The background worker runtime. Each worker is a fiber forked into the runtime's scope when the
 * layer is built and interrupted when it is disposed, so a process runs each worker exactly once.
 * Workers coordinate across processes only through Postgres (row claims, advisory locks).
 */
import { Context, Effect, Layer, Ref, Schedule } from "effect";
import type { SqlError } from "effect/sql";
import { Idempotency } from "../idempotency/idempotency.ts";

export interface Worker<R> {
  readonly name: string;
  /** One pass. Failures are logged and the worker carries on with its next pass. */
  readonly pass: Effect.Effect<void, SqlError.SqlError, R>;
  readonly every: Schedule.Schedule<unknown>;
}

export class Workers extends Context.Service<Workers, { readonly ready: Effect.Effect<boolean> }>()(
  "Workers",
) {}

export const runWorkers = <R>(workers: ReadonlyArray<Worker<R>>): Layer.Layer<Workers, never, R> =>
  Layer.effect(
    Workers,
    Effect.gen(function* () {
      const started = yield* Ref.make(false);
      for (const worker of workers) {
        const loop = worker.pass.pipe(
          Effect.catchCause((cause) => Effect.logWarning(`worker ${worker.name} pass failed`, cause)),
          Effect.repeat(worker.every),
          Effect.annotateLogs({ worker: worker.name }),
        );
        yield* Effect.forkScoped(loop);
      }
      yield* Ref.set(started, true);
      yield* Effect.logInfo("workers started").pipe(
        Effect.annotateLogs({ workers: workers.map((w) => w.name).join(",") }),
      );
      return { ready: Ref.get(started) };
    }),
  );

/** Deletes idempotency records past their retention. Safe on every replica at once (a plain DELETE). */
export const idempotencyPurge: Worker<Idempotency> = {
  name: "idempotency-purge",
  pass: Effect.gen(function* () {
    const idempotency = yield* Idempotency;
    const deleted = yield* idempotency.purgeExpired;
    if (deleted > 0)
      yield* Effect.logInfo("purged expired idempotency records").pipe(Effect.annotateLogs({ deleted }));
  }),
  every: Schedule.spaced("10 minutes"),
};
