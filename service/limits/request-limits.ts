/**
 * The API's request rates, per API key and class of route (reads, writes, test helpers): a token bucket
 * each, of `perSecond` tokens refilled a second and as many at most (docs/limits.md).
 *
 * The buckets live in Postgres so that every service process takes from the same ones
 * (limits/request-buckets.ts), but a request does not go there: a process takes a tenth of a second's
 * tokens at a time (a lease) and hands them out from memory. So a key within its rate costs one round
 * trip per lease, and replicas can only admit less than the bucket allows, never more: a lease's
 * leftover is dropped after a second, not given back (at most a lease a process). A key the bucket
 * refused is refused from memory until the bucket has a token again, without asking Postgres. A flood's
 * requests wait for at most two takes: one lease, then what the bucket holds for those still waiting;
 * those a take leaves nothing for are refused then, not kept for the refill.
 */
import { Clock, Context, Deferred, Effect, Layer, type Scope } from "effect";
import { SqlClient } from "effect/sql";
import { takeTokens } from "./request-buckets.ts";
import { type BucketPolicy, retryAfterSeconds, secondsUntil } from "./token-bucket.ts";

export const REQUEST_CLASSES = ["reads", "writes", "test_helpers"] as const;
export type RequestClass = (typeof REQUEST_CLASSES)[number];

export interface RequestRateLimits {
  /** Requests a second per live key, for reads and for writes each; 0: unlimited. */
  readonly livePerSecond: number;
  /** The same per test key. */
  readonly testPerSecond: number;
  /** Test helpers (`/v1/test/…`) a second per test key; 0: unlimited. */
  readonly testHelpersPerSecond: number;
}

/** Stripe's published rates (100 a second live, 25 in test mode); the test helpers move test chains. */
export const REQUEST_RATE_DEFAULTS: RequestRateLimits = {
  livePerSecond: 100,
  testPerSecond: 25,
  testHelpersPerSecond: 10,
};

/** Requests a second (and the largest burst) for a key of this mode on this class; 0: unlimited. */
export const perSecondOf = (limits: RequestRateLimits, livemode: boolean, requestClass: RequestClass) =>
  requestClass === "test_helpers"
    ? limits.testHelpersPerSecond
    : livemode
      ? limits.livePerSecond
      : limits.testPerSecond;

/** A class's limit as a request leaves it, for the `RateLimit-*` headers and `GET /v1/limits`. */
export interface RateState {
  /** Requests a second, and the largest burst. */
  readonly limit: number;
  readonly remaining: number;
  /** Seconds until `remaining` is back to `limit`, if nothing more is asked. */
  readonly resetSeconds: number;
}

export interface Admission {
  readonly state: RateState;
  /** Set when the request is refused: whole seconds until a token is there again (≥ 1). */
  readonly retryAfterSeconds?: number;
}

/** A lease lasts a tenth of a second of the rate; its leftover is dropped after LEASE_TTL_MS. */
const LEASE_SECONDS = 0.1;
const LEASE_TTL_MS = 1000;
/** Leases kept in memory before the expired ones are dropped (one per key and class in use). */
const MAX_LEASES = 10_000;

interface Lease {
  readonly policy: BucketPolicy;
  /** Tokens taken from the shared bucket and not handed out yet. */
  tokens: number;
  /** When the leftover is dropped. */
  expiresAt: number;
  /** The shared bucket's tokens after the last take, and when (ms on this process's clock). */
  shared: number;
  sharedAt: number;
  /** Refused from memory until then (the shared bucket had no whole token). */
  blockedUntil: number;
  /** A take under way, which other requests of the key wait for: whether it answered. */
  pending: Deferred.Deferred<boolean> | undefined;
}

export const bucketPolicy = (perSecond: number): BucketPolicy => ({ perSecond, capacity: perSecond });

const stateOf = (lease: Lease, now: number): RateState => {
  const { perSecond, capacity } = lease.policy;
  const refill = (Math.max(0, now - lease.sharedAt) / 1000) * perSecond;
  const tokens = Math.min(capacity, (now < lease.expiresAt ? lease.tokens : 0) + lease.shared + refill);
  return {
    limit: capacity,
    remaining: Math.max(0, Math.floor(tokens)),
    resetSeconds: Math.ceil(secondsUntil(lease.policy, tokens, capacity)),
  };
};

/**
 * A refusal's state: none remaining, as when it was decided (the refill since the shared bucket was read
 * may have passed a whole token, which the next request may take).
 */
const refusedStateOf = (lease: Lease, now: number): RateState => ({ ...stateOf(lease, now), remaining: 0 });

export class RequestLimits extends Context.Service<
  RequestLimits,
  {
    /**
     * Counts one request of the key against its class: its state after it, and `retryAfterSeconds` when
     * it is refused. Undefined: the class is unlimited. Never fails: a database that does not answer
     * lets the request through (logged). A token in memory is taken when `admit` is called, so run its
     * effect at once (as `yield*` does).
     */
    readonly admit: (
      apiKeyId: string,
      livemode: boolean,
      requestClass: RequestClass,
    ) => Effect.Effect<Admission | undefined>;
    /** The class's state for the key without counting a request; undefined when unlimited. */
    readonly peek: (apiKeyId: string, livemode: boolean, requestClass: RequestClass) => RateState | undefined;
    readonly limits: RequestRateLimits;
  }
>()("RequestLimits") {
  static readonly layer = (
    limits: RequestRateLimits,
  ): Layer.Layer<RequestLimits, never, SqlClient.SqlClient> =>
    Layer.effect(
      RequestLimits,
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient;
        const clock = yield* Clock.Clock;
        const scope: Scope.Scope = yield* Effect.scope;
        const leases = new Map<string, Lease>();

        const leaseOf = (key: string, perSecond: number): Lease => {
          const known = leases.get(key);
          if (known !== undefined && known.policy.perSecond === perSecond) return known;
          if (leases.size >= MAX_LEASES) {
            const now = clock.currentTimeMillisUnsafe();
            for (const [name, lease] of leases)
              if (lease.pending === undefined && now >= lease.expiresAt && now >= lease.blockedUntil)
                leases.delete(name);
          }
          const lease: Lease = {
            policy: bucketPolicy(perSecond),
            tokens: 0,
            expiresAt: 0,
            shared: perSecond,
            sharedAt: clock.currentTimeMillisUnsafe(),
            blockedUntil: 0,
            pending: undefined,
          };
          leases.set(key, lease);
          return lease;
        };

        /**
         * Takes up to `want` tokens from the shared bucket into the lease, once for every request of the
         * key waiting (forked, so a request that goes away does not cancel the others' take): whether
         * Postgres answered.
         */
        const renew = (key: string, lease: Lease, want: number): Effect.Effect<boolean> =>
          Effect.suspend(() => {
            if (lease.pending !== undefined) return Deferred.await(lease.pending);
            const done = Deferred.makeUnsafe<boolean>();
            lease.pending = done;
            const take = takeTokens(key, lease.policy, want).pipe(
              Effect.provideService(SqlClient.SqlClient, sql),
              Effect.map((taken) => {
                const now = clock.currentTimeMillisUnsafe();
                lease.tokens = taken.granted;
                lease.expiresAt = now + LEASE_TTL_MS;
                lease.shared = taken.left;
                lease.sharedAt = now;
                lease.blockedUntil = taken.granted > 0 ? 0 : now + taken.waitSeconds * 1000;
                return true;
              }),
              Effect.catch((error) =>
                Effect.as(Effect.logWarning("request rate limit not checked", error.message), false),
              ),
              Effect.tap((answered) => Deferred.succeed(done, answered)),
              // Whatever ends the take (the service stopping, too), the next request may take another.
              Effect.ensuring(
                Effect.sync(() => {
                  if (lease.pending === done) lease.pending = undefined;
                  Deferred.doneUnsafe(done, Effect.succeed(false));
                }),
              ),
            );
            return Effect.andThen(Effect.forkIn(take, scope), Deferred.await(done));
          });

        /**
         * A token from the lease, read when the request asks (the effect is run as soon as it is made): no
         * effect is suspended on the way of a request within its rate. `waited`: a take this request
         * waited for has answered.
         */
        const admitNow = (key: string, lease: Lease, waited = false): Effect.Effect<Admission> => {
          const now = clock.currentTimeMillisUnsafe();
          if (lease.tokens > 0 && now < lease.expiresAt) {
            lease.tokens -= 1;
            return Effect.succeed({ state: stateOf(lease, now) });
          }
          if (now < lease.blockedUntil)
            return Effect.succeed({
              state: refusedStateOf(lease, now),
              retryAfterSeconds: retryAfterSeconds((lease.blockedUntil - now) / 1000),
            });
          // The take it waited for left no token to this request, nor a whole one in the shared bucket:
          // refused now. Waiting on for the refill would keep a flood's requests (and the fibers woken
          // at every take) in memory instead of answering them.
          if (waited && lease.shared < 1)
            return Effect.succeed({
              state: refusedStateOf(lease, now),
              retryAfterSeconds: retryAfterSeconds(secondsUntil(lease.policy, lease.shared, 1)),
            });
          // A lease; after a take that left too few for the requests waiting, what the bucket holds, so
          // that one more take serves them all. Unanswered, the request goes through.
          const want = waited
            ? lease.policy.capacity
            : Math.max(1, Math.ceil(lease.policy.perSecond * LEASE_SECONDS));
          return Effect.flatMap(renew(key, lease, want), (answered) =>
            answered
              ? Effect.suspend(() => admitNow(key, lease, true))
              : Effect.sync(() => ({ state: stateOf(lease, clock.currentTimeMillisUnsafe()) })),
          );
        };

        const keyOf = (apiKeyId: string, requestClass: RequestClass) => `api:${requestClass}:${apiKeyId}`;

        return {
          limits,
          admit: (apiKeyId, livemode, requestClass) => {
            const perSecond = perSecondOf(limits, livemode, requestClass);
            if (perSecond === 0) return Effect.succeed(undefined);
            const key = keyOf(apiKeyId, requestClass);
            return admitNow(key, leaseOf(key, perSecond));
          },
          peek: (apiKeyId, livemode, requestClass) => {
            const perSecond = perSecondOf(limits, livemode, requestClass);
            if (perSecond === 0) return undefined;
            const lease = leases.get(keyOf(apiKeyId, requestClass));
            return lease === undefined
              ? { limit: perSecond, remaining: perSecond, resetSeconds: 0 }
              : stateOf(lease, clock.currentTimeMillisUnsafe());
          },
        };
      }),
    );
}
