/**
 * Credentials (API keys, console sessions) cached in process, so that a known credential costs no
 * database round trip per request, and forgotten across processes when any is revoked.
 *
 * - Bounded: at most CREDENTIAL_CACHE_CAPACITY entries per cache, least recently used dropped first.
 * - Short-lived: an entry lives CREDENTIAL_CACHE_TTL (60 s) after its lookup, by the Effect clock.
 * - Only successes are kept: an unknown key is looked up every time (random guesses cannot evict known
 *   keys), and a database failure is never remembered.
 * - Revocation: a trigger (migration `0015_api_auth_revocations`) sends `NOTIFY billing_auth_revoked`
 *   when a key is revoked or deleted or a session ends; every process LISTENs and then clears all its
 *   credential caches. A lookup in flight when the notification arrives is dropped with the rest (Effect's
 *   Cache keeps an entry from the moment its lookup starts, and clearing removes it), so a row read
 *   before the revocation is never cached after it: the generation of the cache moves on.
 * - Trust only while listening: until LISTEN is confirmed, and from the moment its connection fails until
 *   it is confirmed again, every lookup goes to the database (a notification sent meanwhile is lost).
 *
 * A process without `CredentialRevocations` (the operator CLI) caches nothing.
 */
import { PgClient } from "@effect/sql-pg";
import { Cache, Context, Duration, Effect, Exit, Layer, Option, Queue, type Scope } from "effect";

export const CREDENTIAL_CACHE_TTL = Duration.seconds(60);
export const CREDENTIAL_CACHE_CAPACITY = 10_000;
export const CREDENTIALS_REVOKED_CHANNEL = "billing_auth_revoked";
export const RELISTEN_AFTER = Duration.seconds(1);

export interface CredentialCache<A, E> {
  /** The credential of `key` (a hash of the secret): cached, or looked up. */
  readonly get: (key: string) => Effect.Effect<A, E>;
  /** Forgets every entry, including lookups in flight. */
  readonly clear: Effect.Effect<void>;
}

/**
 * A cache over `lookup` that is used only while `trusted` says so (otherwise every call looks up).
 * Exposed for the unit tests of its TTL and bound; services get theirs from `CredentialRevocations`.
 */
export const makeCredentialCache = <A, E>(
  lookup: (key: string) => Effect.Effect<A, E>,
  options: {
    readonly trusted: Effect.Effect<boolean>;
    readonly capacity?: number;
    readonly timeToLive?: Duration.Duration;
  },
): Effect.Effect<CredentialCache<A, E>> =>
  Effect.map(
    Cache.makeWith(lookup, {
      capacity: options.capacity ?? CREDENTIAL_CACHE_CAPACITY,
      timeToLive: (exit) =>
        Exit.isSuccess(exit) ? (options.timeToLive ?? CREDENTIAL_CACHE_TTL) : Duration.zero,
    }),
    (cache) => ({
      get: (key: string) =>
        Effect.flatMap(options.trusted, (trusted) => (trusted ? Cache.get(cache, key) : lookup(key))),
      clear: Cache.invalidateAll(cache),
    }),
  );

export class CredentialRevocations extends Context.Service<
  CredentialRevocations,
  {
    /** True while this process hears revocations: only then is a cached credential trusted. */
    readonly listening: Effect.Effect<boolean>;
    /** A credential cache that every revocation (in any process) and every loss of LISTEN clears. */
    readonly cache: <A, E>(
      lookup: (key: string) => Effect.Effect<A, E>,
    ) => Effect.Effect<CredentialCache<A, E>>;
    /** Clears every cache of this process now (the revoking process does not wait for its own NOTIFY). */
    readonly clearAll: Effect.Effect<void>;
  }
>()("CredentialRevocations") {
  static readonly layer: Layer.Layer<CredentialRevocations, never, PgClient.PgClient> = Layer.effect(
    CredentialRevocations,
    Effect.gen(function* () {
      const pg = yield* PgClient.PgClient;
      let listening = false;
      const caches: Array<CredentialCache<unknown, unknown>> = [];
      const clearAll = Effect.forEach(caches, (cache) => cache.clear, { discard: true });

      const listen: Effect.Effect<never, unknown, Scope.Scope> = Effect.gen(function* () {
        const notifications = yield* pg.listen(CREDENTIALS_REVOKED_CHANNEL);
        // Whatever was revoked while nobody listened is forgotten before the cache is trusted again.
        yield* clearAll;
        listening = true;
        return yield* Queue.take(notifications).pipe(Effect.andThen(clearAll), Effect.forever);
      });
      yield* Effect.forkScoped(
        Effect.scoped(listen).pipe(
          Effect.catchCause((cause) =>
            Effect.gen(function* () {
              listening = false;
              yield* clearAll;
              yield* Effect.logWarning(
                `listening on ${CREDENTIALS_REVOKED_CHANNEL} failed; listening again`,
                cause,
              );
              yield* Effect.sleep(RELISTEN_AFTER);
            }),
          ),
          Effect.forever,
          Effect.ensuring(
            Effect.sync(() => {
              listening = false;
            }),
          ),
        ),
      );

      const trusted = Effect.sync(() => listening);
      return {
        listening: trusted,
        cache: <A, E>(lookup: (key: string) => Effect.Effect<A, E>) =>
          Effect.tap(makeCredentialCache(lookup, { trusted }), (cache) =>
            Effect.sync(() => void caches.push(cache as CredentialCache<unknown, unknown>)),
          ),
        clearAll,
      };
    }),
  );

  /** The caches of a service: its revocations' when the process has them, else none (every call looks up). */
  static readonly cacheFor = <A, E>(
    lookup: (key: string) => Effect.Effect<A, E>,
  ): Effect.Effect<CredentialCache<A, E>> =>
    Effect.flatMap(Effect.serviceOption(CredentialRevocations), (revocations) =>
      Option.match(revocations, {
        onNone: () => Effect.succeed({ get: lookup, clear: Effect.void }),
        onSome: (r) => r.cache(lookup),
      }),
    );
}
