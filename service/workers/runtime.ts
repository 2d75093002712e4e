/**
 * The background worker runtime. Each worker is a fiber forked into the runtime's scope when the
 * layer is built and interrupted when it is disposed, so a process runs each worker exactly once.
 * Readiness is per worker: each successful pass records its time from the Clock. Each finished pass is
 * counted (`billing_worker_passes_total`), which also tells a test that a pass ran after something.
 */
import type { PgClient } from "@effect/sql-pg";
import { Clock, Context, Effect, Layer, Queue, Ref } from "effect";
import { wakeUps } from "../db/notifications.ts";
import { recordMetric } from "../metrics/metrics.ts";
import { staleWorkers, type Worker } from "./worker.ts";

export interface WorkersStatus {
  readonly ready: boolean;
  /** Workers whose last successful pass is older than `staleAfter` their interval, by name. */
  readonly stale: ReadonlyArray<string>;
}

export class Workers extends Context.Service<
  Workers,
  { readonly ready: Effect.Effect<boolean>; readonly status: Effect.Effect<WorkersStatus> }
>()("Workers") {}

/** Counts a finished pass (`billing_worker_passes_total`): how often each worker gets through. */
const countPass = (worker: string, outcome: "success" | "failure") =>
  recordMetric((m) => m.workerPasses.inc({ worker, outcome }));

const runWorker = <R>(worker: Worker<R>, succeeded: Effect.Effect<void>) =>
  Effect.gen(function* () {
    const wake = worker.wakeOn === undefined ? undefined : yield* wakeUps(...[worker.wakeOn].flat());
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
      Effect.andThen(countPass(worker.name, "success")),
      Effect.catchCause((cause) =>
        Effect.andThen(
          Effect.logWarning(`worker ${worker.name} pass failed`, cause),
          countPass(worker.name, "failure"),
        ),
      ),
      Effect.andThen(pause),
      Effect.forever,
    );
  }).pipe(Effect.annotateLogs({ worker: worker.name }));

/** What a list of workers needs: the union of each worker's requirements. */
// biome-ignore lint/suspicious/noExplicitAny: inferring each worker's own requirements
export type WorkerRequirements<W extends Worker<any>> = W extends Worker<infer R> ? R : never;

// biome-ignore lint/suspicious/noExplicitAny: inferring each worker's own requirements
export const runWorkers = <const W extends ReadonlyArray<Worker<any>>>(
  workers: W,
): Layer.Layer<Workers, never, WorkerRequirements<W[number]> | PgClient.PgClient> =>
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
