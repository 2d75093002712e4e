import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  JITTER,
  MAX_ATTEMPTS,
  nextRetryDelayMs,
  nextState,
  RETRY_WAITS_MS,
} from "../../service/webhooks/retry-schedule.ts";

const HOUR = 3_600_000;

describe("webhook retry schedule", () => {
  it("grows, never shrinks, and spans about two days over twelve attempts", () => {
    expect(MAX_ATTEMPTS).toBe(12);
    for (let i = 1; i < RETRY_WAITS_MS.length; i++)
      expect(RETRY_WAITS_MS[i] ?? 0).toBeGreaterThanOrEqual(RETRY_WAITS_MS[i - 1] ?? 0);
    const nominal = RETRY_WAITS_MS.reduce((sum, wait) => sum + wait, 0);
    expect(nominal / HOUR).toBeCloseTo(51.7, 1);
  });

  it("jitters every wait within ±10 % and stops after the last attempt, whatever the randomness", () => {
    fc.assert(
      fc.property(
        fc.array(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), {
          minLength: 11,
          maxLength: 11,
        }),
        (randoms) => {
          let total = 0;
          for (let attempt = 1; attempt < MAX_ATTEMPTS; attempt++) {
            const delay = nextRetryDelayMs(attempt, randoms[attempt - 1] ?? 0);
            const nominal = RETRY_WAITS_MS[attempt - 1] ?? 0;
            expect(delay).toBeDefined();
            expect(delay).toBeGreaterThanOrEqual(Math.floor(nominal * (1 - JITTER)));
            expect(delay).toBeLessThanOrEqual(Math.ceil(nominal * (1 + JITTER)));
            total += delay ?? 0;
          }
          expect(nextRetryDelayMs(MAX_ATTEMPTS, randoms[0] ?? 0)).toBeUndefined();
          expect(total).toBeGreaterThan(46 * HOUR);
          expect(total).toBeLessThan(57 * HOUR);
        },
      ),
      { numRuns: 500 },
    );
  });

  it("moves a delivery to succeeded on 2xx, failed after the last attempt, pending otherwise", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: MAX_ATTEMPTS }),
        fc.boolean(),
        fc.integer({ min: 0, max: 2 ** 40 }),
        fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
        (number, ok, at, random) => {
          const next = nextState(number, ok, at, random);
          if (ok) expect(next).toEqual({ status: "succeeded", nextAttemptAt: null });
          else if (number === MAX_ATTEMPTS) expect(next).toEqual({ status: "failed", nextAttemptAt: null });
          else {
            expect(next.status).toBe("pending");
            expect((next.nextAttemptAt ?? 0) - at).toBe(nextRetryDelayMs(number, random));
          }
        },
      ),
    );
  });

  it("never retries for attempt numbers outside the schedule", () => {
    for (const attempt of [0, -1, MAX_ATTEMPTS, MAX_ATTEMPTS + 1, 1.5])
      expect(nextRetryDelayMs(attempt, 0.5)).toBeUndefined();
  });
});
