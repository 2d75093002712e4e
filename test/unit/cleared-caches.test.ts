/**
 * The credential cache (service/db/cleared-caches.ts) on the Effect TestClock: an entry lives its
 * TTL and no longer, at most `capacity` entries are kept (least recently used dropped first), failures
 * are never kept, nothing is cached while revocations are not heard, and a clear drops a lookup that was
 * in flight (its row may predate the revocation).
 */
import { describe, expect, it } from "@effect/vitest";
import { Deferred, Duration, Effect, Exit, Fiber, Ref } from "effect";
import { TestClock } from "effect/testing";
import { CACHE_TTL, makeClearedCache } from "../../service/db/cleared-caches.ts";

/** A lookup that counts its calls per key and answers `key:<n>` (n = that key's call count). */
const countingLookup = Effect.gen(function* () {
  const calls = yield* Ref.make(new Map<string, number>());
  const lookup = (key: string) =>
    Ref.modify(calls, (map) => {
      const n = (map.get(key) ?? 0) + 1;
      return [`${key}:${n}`, new Map(map).set(key, n)];
    });
  const count = (key: string) => Effect.map(Ref.get(calls), (map) => map.get(key) ?? 0);
  return { lookup, count };
});

const trusted = Effect.succeed(true);

describe("credential cache", () => {
  it("keeps a credential for 60 s, then looks it up again", () => {
    expect(Duration.toSeconds(CACHE_TTL)).toBe(60);
  });

  it.effect("an entry lives its TTL and no longer (TestClock)", () =>
    Effect.gen(function* () {
      const { lookup, count } = yield* countingLookup;
      const cache = yield* makeClearedCache(lookup, { trusted });
      expect(yield* cache.get("a")).toBe("a:1");
      yield* TestClock.adjust(Duration.seconds(59));
      expect(yield* cache.get("a")).toBe("a:1");
      expect(yield* count("a")).toBe(1);
      yield* TestClock.adjust(Duration.seconds(1));
      expect(yield* cache.get("a")).toBe("a:2");
      expect(yield* count("a")).toBe(2);
    }),
  );

  it.effect("holds at most `capacity` entries, dropping the least recently used", () =>
    Effect.gen(function* () {
      const { lookup, count } = yield* countingLookup;
      const cache = yield* makeClearedCache(lookup, { trusted, capacity: 2 });
      yield* cache.get("a");
      yield* cache.get("b");
      yield* cache.get("a"); // a is now the most recently used
      yield* cache.get("c"); // evicts b
      expect([yield* count("a"), yield* count("b"), yield* count("c")]).toEqual([1, 1, 1]);
      yield* cache.get("a");
      yield* cache.get("c");
      expect([yield* count("a"), yield* count("c")]).toEqual([1, 1]);
      expect(yield* cache.get("b")).toBe("b:2");
    }),
  );

  it.effect("never keeps a failure (an unknown key is looked up every time)", () =>
    Effect.gen(function* () {
      const calls = yield* Ref.make(0);
      const cache = yield* makeClearedCache(
        (key: string) =>
          Effect.andThen(
            Ref.update(calls, (n) => n + 1),
            Effect.fail(`unknown ${key}`),
          ),
        { trusted },
      );
      expect(yield* Effect.exit(cache.get("x"))).toEqual(Exit.fail("unknown x"));
      expect(yield* Effect.exit(cache.get("x"))).toEqual(Exit.fail("unknown x"));
      expect(yield* Ref.get(calls)).toBe(2);
    }),
  );

  it.effect("caches nothing while revocations are not heard", () =>
    Effect.gen(function* () {
      const { lookup, count } = yield* countingLookup;
      const listening = yield* Ref.make(false);
      const cache = yield* makeClearedCache(lookup, { trusted: Ref.get(listening) });
      yield* cache.get("a");
      yield* cache.get("a");
      expect(yield* count("a")).toBe(2);
      yield* Ref.set(listening, true);
      yield* cache.get("a");
      yield* cache.get("a");
      expect(yield* count("a")).toBe(3);
    }),
  );

  it.effect("a clear forgets every entry, and a lookup in flight is not cached after it", () =>
    Effect.gen(function* () {
      const { lookup, count } = yield* countingLookup;
      const release = yield* Deferred.make<void>();
      const gated = (key: string) => Effect.andThen(Deferred.await(release), lookup(key));
      const cache = yield* makeClearedCache((key: string) => (key === "slow" ? gated(key) : lookup(key)), {
        trusted,
      });
      yield* cache.get("a");
      yield* cache.clear;
      expect(yield* cache.get("a")).toBe("a:2");

      // The row is read before the revocation and arrives after it: the request that asked gets it, the
      // cache does not keep it.
      const inFlight = yield* Effect.forkChild(cache.get("slow"));
      yield* Effect.yieldNow;
      yield* cache.clear;
      yield* Deferred.succeed(release, undefined);
      expect(yield* Fiber.join(inFlight)).toBe("slow:1");
      expect(yield* cache.get("slow")).toBe("slow:2");
      expect(yield* count("slow")).toBe(2);
    }),
  );
});
