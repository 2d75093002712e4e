/**
 * Caches of rows that rarely change, kept in process so that a hot request costs no database round trip
 * for them, and cleared across processes whenever any of those rows changes: credentials (API keys,
 * console sessions: auth/) and merchants' chain configurations (chains/merchant-chains.ts).
 *
 * - Bounded: at most CACHE_CAPACITY entries per cache, least recently used dropped first.
 * - Short-lived: an entry lives CACHE_TTL (60 s) after its lookup, by the Effect clock.
 * - Only successes are kept: an unknown key is looked up every time (random guesses cannot evict known
 *   keys), and a database failure is never remembered.
 * - Cleared on change: triggers (migration `0020_caches_cleared`) send `NOTIFY billing_caches_cleared`
 *   when a key is revoked or deleted, a session ends or a merchant's chain configuration is written;
 *   every process LISTENs and then clears all its caches. A lookup in flight when the notification
 *   arrives is dropped with the rest (Effect's Cache keeps an entry from the moment its lookup starts, and
 *   clearing removes it), so a row read before the change is never cached after it: the generation of the
 *   cache moves on.
 * - Trust only while listening: until LISTEN is confirmed, and from the moment its connection fails until
 *   it is confirmed again, every lookup goes to the database (a notification sent meanwhile is lost).
 *
 * The window left: from the changing COMMIT to the notification reaching another process (one loopback
 * packet, longer on a loaded machine); the changing process clears its own caches at once (`clearAll`).
 * What fixes a payout address on a new object (a mandate, a payment, a subscription) reads the
 * configuration fresh (`MerchantChains.current`), so it never takes an address just replaced. A process
 * without `ClearedCaches` (the operator CLI) caches nothing.
 */
import { PgClient } from "@effect/sql-pg";
import { Cache, Context, Duration, Effect, Exit, Layer, Option, Queue, type Scope } from "effect";

export const CACHE_TTL = Duration.seconds(60);
export const CACHE_CAPACITY = 10_000;
export const CACHES_CLEARED_CHANNEL = "billing_caches_cleared";
export const RELISTEN_AFTER = Duration.seconds(1);

export interface ClearedCache<A, E> {
  /** The value of `key`: cached, or looked up. */
  readonly get: (key: string) => Effect.Effect<A, E>;
  /** Forgets every entry, including lookups in flight. */
  readonly clear: Effect.Effect<void>;
}

/**
 * A cache over `lookup` that is used only while `trusted` says so (otherwise every call looks up).
 * Exposed for the unit tests of its TTL and bound; services get theirs from `ClearedCaches`.
 */
export const makeClearedCache = <A, E>(
  lookup: (key: string) => Effect.Effect<A, E>,
  options: {
    readonly trusted: Effect.Effect<boolean>;
    readonly capacity?: number;
    readonly timeToLive?: Duration.Duration;
  },
): Effect.Effect<ClearedCache<A, E>> =>
  Effect.map(
    Cache.makeWith(lookup, {
      capacity: options.capacity ?? CACHE_CAPACITY,
      timeToLive: (exit) => (Exit.isSuccess(exit) ? (options.timeToLive ?? CACHE_TTL) : Duration.zero),
    }),
    (cache) => ({
      get: (key: string) =>
        Effect.flatMap(options.trusted, (trusted) => (trusted ? Cache.get(cache, key) : lookup(key))),
      clear: Cache.invalidateAll(cache),
    }),
  );

export class ClearedCaches extends Context.Service<
  ClearedCaches,
  {
    /** True while this process hears changes: only then is a cached value trusted. */
    readonly listening: Effect.Effect<boolean>;
    /** A cache that every change (in any process) and every loss of LISTEN clears. */
    readonly cache: <A, E>(lookup: (key: string) => Effect.Effect<A, E>) => Effect.Effect<ClearedCache<A, E>>;
    /** Clears every cache of this process now (the changing process does not wait for its own NOTIFY). */
    readonly clearAll: Effect.Effect<void>;
  }
>()("ClearedCaches") {
  static readonly layer: Layer.Layer<ClearedCaches, never, PgClient.PgClient> = Layer.effect(
    ClearedCaches,
    Effect.gen(function* () {
      const pg = yield* PgClient.PgClient;
      let listening = false;
      const caches: Array<ClearedCache<unknown, unknown>> = [];
      const clearAll = Effect.forEach(caches, (cache) => cache.clear, { discard: true });

      const listen: Effect.Effect<never, unknown, Scope.Scope> = Effect.gen(function* () {
        const notifications = yield* pg.listen(CACHES_CLEARED_CHANNEL);
        // Whatever changed while nobody listened is forgotten before the caches are trusted again.
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
                `listening on ${CACHES_CLEARED_CHANNEL} failed; listening again`,
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
          Effect.tap(makeClearedCache(lookup, { trusted }), (cache) =>
            Effect.sync(() => void caches.push(cache as ClearedCache<unknown, unknown>)),
          ),
        clearAll,
      };
    }),
  );

  /** A service's cache: cleared on changes when the process has `ClearedCaches`, else none (every call looks up). */
  static readonly cacheFor = <A, E>(
    lookup: (key: string) => Effect.Effect<A, E>,
  ): Effect.Effect<ClearedCache<A, E>> =>
    Effect.flatMap(Effect.serviceOption(ClearedCaches), (caches) =>
      Option.match(caches, {
        onNone: () => Effect.succeed({ get: lookup, clear: Effect.void }),
        onSome: (r) => r.cache(lookup),
      }),
    );
}
