/**
 * The background worker runtime. Each worker is a fiber forked into the runtime's scope when the
 * layer is built and interrupted when it is disposed, so a process runs each worker exactly once.
 * Workers coordinate across processes only through Postgres (unique keys, row claims, advisory locks).
 */
import type { PgClient } from "@effect/sql-pg";
import { Context, type Duration, Effect, Layer, Queue, Ref } from "effect";
import type { SqlError } from "effect/sql";
import { wakeUps } from "../db/notifications.ts";
import { Idempotency } from "../idempotency/idempotency.ts";

export interface Worker<R> {
  readonly name: string;
  /** One pass. Failures are logged and the worker carries on with its next pass. */
  readonly pass: Effect.Effect<void, SqlError.SqlError, R>;
  /** Longest wait between passes. */
  readonly interval: Duration.Input;
  /** A Postgres notification channel that starts the next pass at once. */
  readonly wakeOn?: string;
}

export class Workers extends Context.Service<Workers, { readonly ready: Effect.Effect<boolean> }>()(
  "Workers",
) {}

const runWorker = <R>(worker: Worker<R>) =>
  Effect.gen(function* () {
    const wake = worker.wakeOn ? yield* wakeUps(worker.wakeOn) : undefined;
    const pause = wake
      ? Queue.take(wake).pipe(
          // One pass serves every notification that arrived meanwhile.
          Effect.andThen(Queue.clear(wake)),
          Effect.timeoutOption(worker.interval),
          Effect.ignore,
        )
      : Effect.sleep(worker.interval);
    return yield* worker.pass.pipe(
      Effect.catchCause((cause) => Effect.logWarning(`worker ${worker.name} pass failed`, cause)),
      Effect.andThen(pause),
      Effect.forever,
    );
  }).pipe(Effect.annotateLogs({ worker: worker.name }));

export const runWorkers = <R>(
  workers: ReadonlyArray<Worker<R>>,
): Layer.Layer<Workers, never, R | PgClient.PgClient> =>
  Layer.effect(
    Workers,
    Effect.gen(function* () {
      const started = yield* Ref.make(false);
      for (const worker of workers) yield* Effect.forkScoped(runWorker(worker));
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
  interval: "10 minutes",
};
