/**
 * The background worker runtime. Each worker is a fiber forked into the runtime's scope when the
 * layer is built and interrupted when it is disposed, so a process runs each worker exactly once.
 * Workers coordinate across processes only through Postgres (unique keys, row claims, advisory locks).
 */
import type { PgClient } from "@effect/sql-pg";
import { Clock, Context, Duration, Effect, Layer, Queue, Ref } from "effect";
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

export interface WorkersStatus {
  readonly ready: boolean;
  /** Workers whose last successful pass is older than `staleAfter` their interval, by name. */
  readonly stale: ReadonlyArray<string>;
}

export class Workers extends Context.Service<
  Workers,
  { readonly ready: Effect.Effect<boolean>; readonly status: Effect.Effect<WorkersStatus> }
>()("Workers") {}

/** Room for a slow pass (a billing boundary, a slow RPC) on top of the intervals. */
export const STALE_SLACK = Duration.seconds(30);

/**
 * How old a worker's last successful pass may be before the worker counts as not ready: three of its
 * intervals (a pass or two may fail on a passing hiccup) plus `STALE_SLACK`. Until its first success, the
 * worker's start counts as one.
 */
export const staleAfter = (interval: Duration.Input): Duration.Duration =>
  Duration.sum(Duration.times(Duration.fromInputUnsafe(interval), 3), STALE_SLACK);

/** The workers whose last success (ms) is older than their bound at `now` (ms). */
export const staleWorkers = (
  workers: ReadonlyArray<Pick<Worker<unknown>, "name" | "interval">>,
  lastSuccess: ReadonlyMap<string, number>,
  now: number,
): ReadonlyArray<string> =>
  workers
    .filter((w) => now - (lastSuccess.get(w.name) ?? now) > Duration.toMillis(staleAfter(w.interval)))
    .map((w) => w.name);

const runWorker = <R>(worker: Worker<R>, succeeded: Effect.Effect<void>) =>
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
      Effect.andThen(succeeded),
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
      const startedAt = yield* Clock.currentTimeMillis;
      const lastSuccess = yield* Ref.make<ReadonlyMap<string, number>>(
        new Map(workers.map((w) => [w.name, startedAt])),
      );
      for (const worker of workers) {
        const succeeded = Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Ref.update(lastSuccess, (map) => new Map(map).set(worker.name, now)),
        );
        yield* Effect.forkScoped(runWorker(worker, succeeded));
      }
      yield* Effect.logInfo("workers started").pipe(
        Effect.annotateLogs({ workers: workers.map((w) => w.name).join(",") }),
      );
      const status = Effect.gen(function* () {
        const stale = staleWorkers(workers, yield* Ref.get(lastSuccess), yield* Clock.currentTimeMillis);
        return { ready: stale.length === 0, stale };
      });
      return { ready: Effect.map(status, (s) => s.ready), status };
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
