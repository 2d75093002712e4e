/**
 * Wake-ups from Postgres notifications that outlive a connection. A LISTEN's queue fails for good when
 * its connection drops (Postgres restarted, a network cut): a consumer that kept waiting on it would
 * spin on the failed queue or, forked, die with an unhandled failure. Here a failure is logged and the
 * channel listened to again after a pause; every (re)start also signals a wake-up, because
 * notifications sent while nobody listened are lost.
 */
import { PgClient } from "@effect/sql-pg";
import { Effect, Queue, type Scope } from "effect";

export const RELISTEN_AFTER = "1 second";

/** A queue holding at most one pending wake-up for any of `channels`, kept alive for the enclosing scope. */
export const wakeUps = (
  ...channels: ReadonlyArray<string>
): Effect.Effect<Queue.Dequeue<void>, never, PgClient.PgClient | Scope.Scope> =>
  Effect.gen(function* () {
    const pg = yield* PgClient.PgClient;
    const wake = yield* Queue.sliding<void>(1);
    for (const channel of channels) {
      const listening = Effect.scoped(
        Effect.gen(function* () {
          const notifications = yield* pg.listen(channel);
          yield* Queue.offer(wake, undefined);
          return yield* Queue.take(notifications).pipe(
            Effect.andThen(Queue.offer(wake, undefined)),
            Effect.forever,
          );
        }),
      );
      yield* Effect.forkScoped(
        listening.pipe(
          Effect.catchCause((cause) =>
            Effect.logWarning(`listening on ${channel} failed; listening again`, cause).pipe(
              Effect.andThen(Effect.sleep(RELISTEN_AFTER)),
            ),
          ),
          Effect.forever,
        ),
      );
    }
    return wake;
  });
