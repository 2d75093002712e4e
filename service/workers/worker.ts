/**
 * What a background worker is: a pass, a schedule, and optionally a Postgres channel that wakes it.
 * Capabilities define their workers; the runtime (runtime.ts) runs them. Workers coordinate across
 * processes only through Postgres (unique keys, row claims, advisory locks).
 *
 * Readiness: a worker whose last success is older than 3 × its interval + STALE_SLACK is named in
 * `/ready` (`workers: "stale: fact-relay"`). Three intervals let a pass or two fail on a passing hiccup;
 * the slack lets a legitimately long pass finish. The start counts as a success, so a process is ready at
 * once and a worker failing from its first pass shows after the bound; a failing pass is only logged.
 */
import { Duration, type Effect } from "effect";
import type { SqlError } from "effect/sql";

export interface Worker<R> {
  readonly name: string;
  /** One pass. Failures are logged and the worker carries on with its next pass. */
  readonly pass: Effect.Effect<void, SqlError.SqlError, R>;
  /** Longest wait between passes. */
  readonly interval: Duration.Input;
  /** Postgres notification channels, any of which starts the next pass at once. */
  readonly wakeOn?: string | ReadonlyArray<string>;
}

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
