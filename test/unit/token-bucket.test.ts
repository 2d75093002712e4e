/**
 * The token-bucket arithmetic behind the API's request rates (service/limits/token-bucket.ts): a bucket
 * never holds more than its capacity nor less than nothing, refills at its rate, grants no more than a
 * burst of its capacity plus its rate over any stretch of time, and a refusal's Retry-After is never 0.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  type BucketPolicy,
  fullBucket,
  retryAfterSeconds,
  take,
  tokensAt,
} from "../../service/limits/token-bucket.ts";

const policies = fc
  .record({
    perSecond: fc.integer({ min: 1, max: 1_000_000 }),
    burstSeconds: fc.constantFrom(1, 2, 10),
  })
  .map(({ perSecond, burstSeconds }): BucketPolicy => ({ perSecond, capacity: perSecond * burstSeconds }));
/** Seconds on the database's clock: around now, or anywhere a double can be. */
const times = fc.oneof(
  fc.double({ min: 1.7e9, max: 1.8e9, noNaN: true }),
  fc.double({ min: 0, max: Number.MAX_VALUE, noNaN: true }),
);

describe("token buckets", () => {
  it("hold between nothing and their capacity, finite, whatever the times and what was stored", () => {
    fc.assert(
      fc.property(
        policies,
        fc.double({ min: 0, max: Number.MAX_VALUE, noNaN: true }),
        times,
        times,
        (policy, tokens, at, now) => {
          const held = tokensAt(policy, { tokens, at }, now);
          expect(Number.isFinite(held)).toBe(true);
          expect(held).toBeGreaterThanOrEqual(0);
          expect(held).toBeLessThanOrEqual(policy.capacity);
        },
      ),
    );
  });

  it("grant at most what was asked and what is there, in whole tokens, and keep the rest", () => {
    fc.assert(
      fc.property(
        policies,
        fc.double({ min: 0, max: 1e7, noNaN: true }),
        // Small enough that a wait of a microsecond still moves the clock (doubles near 1.7e9 do not).
        fc.double({ min: 0, max: 1e6, noNaN: true }),
        fc.double({ min: 0, max: 1e6, noNaN: true }),
        fc.integer({ min: 1, max: 1_000_000 }),
        (policy, tokens, at, now, want) => {
          const before = tokensAt(policy, { tokens, at }, now);
          const taken = take(policy, { tokens, at }, now, want);
          expect(Number.isInteger(taken.granted)).toBe(true);
          expect(taken.granted).toBeLessThanOrEqual(want);
          expect(taken.granted).toBe(Math.min(want, Math.floor(before + 1e-9)));
          expect(taken.state.tokens).toBeCloseTo(before - taken.granted, 6);
          expect(taken.state.tokens).toBeGreaterThanOrEqual(0);
          // A wait only when no whole token is left; after it, one is there again.
          expect(taken.waitSeconds > 0).toBe(taken.state.tokens + 1e-9 < 1);
          const later = tokensAt(policy, taken.state, taken.state.at + taken.waitSeconds);
          expect(later + 1e-3).toBeGreaterThanOrEqual(1);
        },
      ),
    );
  });

  it("grant no more than the burst plus the rate over any stretch of requests, from a full bucket", () => {
    fc.assert(
      fc.property(
        policies,
        fc.double({ min: 1.7e9, max: 1.8e9, noNaN: true }),
        fc.array(
          fc.record({
            after: fc.double({ min: 0, max: 2, noNaN: true }),
            want: fc.integer({ min: 1, max: 50 }),
          }),
          { minLength: 1, maxLength: 200 },
        ),
        (policy, start, requests) => {
          let state = fullBucket(policy, start);
          let now = start;
          let granted = 0;
          for (const request of requests) {
            now += request.after;
            const taken = take(policy, state, now, request.want);
            granted += taken.granted;
            state = taken.state;
          }
          expect(granted).toBeLessThanOrEqual(policy.capacity + policy.perSecond * (now - start) + 1e-6);
        },
      ),
    );
  });

  it("grant a whole burst at once from a full bucket, then nothing until it refills", () => {
    const policy = { perSecond: 25, capacity: 25 };
    const full = fullBucket(policy, 1_000);
    const burst = take(policy, full, 1_000, 100);
    expect(burst.granted).toBe(25);
    const empty = take(policy, burst.state, 1_000, 1);
    expect(empty.granted).toBe(0);
    expect(empty.waitSeconds).toBeCloseTo(1 / 25, 9);
    expect(take(policy, empty.state, 1_000 + 1 / 25, 1).granted).toBe(1);
    // A clock that went back grants nothing more.
    expect(take(policy, burst.state, 990, 1).granted).toBe(0);
  });

  it("never tell a client to retry after 0 seconds", () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: Number.MAX_VALUE, noNaN: true }), (wait) => {
        const after = retryAfterSeconds(wait);
        expect(Number.isInteger(after)).toBe(true);
        expect(after).toBeGreaterThanOrEqual(1);
        expect(after).toBeGreaterThanOrEqual(Math.min(wait, Number.MAX_SAFE_INTEGER));
      }),
    );
    expect(retryAfterSeconds(0)).toBe(1);
    expect(retryAfterSeconds(1e-9)).toBe(1);
    expect(retryAfterSeconds(1.2)).toBe(2);
  });
});
