import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { MAX_ATTEMPTS, nextRetryDelayMs, nextState } from "../../service/webhooks/retry-schedule.ts";

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/**
 * The documented schedule (docs/webhooks.md, "Retries"), written out here rather than read from the
 * code: the wait after each failed attempt, jittered by ±10 %; 12 attempts over about two days (51 h 42
 * min nominal), then the delivery is failed.
 */
const DOCUMENTED_WAITS = [
  30 * SECOND,
  2 * MINUTE,
  10 * MINUTE,
  30 * MINUTE,
  1 * HOUR,
  2 * HOUR,
  4 * HOUR,
  8 * HOUR,
  12 * HOUR,
  12 * HOUR,
  12 * HOUR,
];
const DOCUMENTED_ATTEMPTS = 12;
const within = (delay: number, nominal: number) =>
  delay >= Math.floor(nominal * 0.9) && delay <= Math.ceil(nominal * 1.1);
const random = fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true });

describe("webhook retry schedule", () => {
  it("has the documented number of attempts and nominal span", () => {
    expect(MAX_ATTEMPTS).toBe(DOCUMENTED_ATTEMPTS);
    expect(DOCUMENTED_WAITS).toHaveLength(DOCUMENTED_ATTEMPTS - 1);
    // "51 h 42 min nominal", to the minute.
    const nominal = DOCUMENTED_WAITS.reduce((a, b) => a + b, 0);
    expect(nominal).toBeGreaterThanOrEqual(51 * HOUR + 42 * MINUTE);
    expect(nominal).toBeLessThan(51 * HOUR + 43 * MINUTE);
  });

  it("waits the documented time after each failure, within ±10 %, and the jitter really spreads", () => {
    fc.assert(
      fc.property(fc.array(random, { minLength: 11, maxLength: 11 }), (randoms) => {
        let total = 0;
        DOCUMENTED_WAITS.forEach((nominal, i) => {
          const delay = nextRetryDelayMs(i + 1, randoms[i] ?? 0);
          expect(delay !== undefined && within(delay, nominal), `after attempt ${i + 1}: ${delay}`).toBe(
            true,
          );
          total += delay ?? 0;
        });
        expect(nextRetryDelayMs(DOCUMENTED_ATTEMPTS, randoms[0] ?? 0)).toBeUndefined();
        // About two days, whatever the jitter.
        expect(total).toBeGreaterThan(0.9 * (51 * HOUR + 42 * MINUTE) - 1);
        expect(total).toBeLessThan(1.1 * (51 * HOUR + 42 * MINUTE) + 1);
      }),
      { numRuns: 500 },
    );
    // The jitter is a spread, not a constant: the ends of the randomness reach the ends of the band.
    DOCUMENTED_WAITS.forEach((nominal, i) => {
      expect(nextRetryDelayMs(i + 1, 0)).toBeLessThanOrEqual(Math.ceil(nominal * 0.91));
      expect(nextRetryDelayMs(i + 1, 0.999_999)).toBeGreaterThanOrEqual(Math.floor(nominal * 1.09));
    });
  });

  it("moves a delivery to succeeded on 2xx, failed after the twelfth attempt, pending with the documented wait otherwise", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: DOCUMENTED_ATTEMPTS }),
        fc.boolean(),
        fc.integer({ min: 0, max: 2 ** 40 }),
        random,
        (number, ok, at, r) => {
          const next = nextState(number, ok, at, r);
          if (ok) expect(next).toEqual({ status: "succeeded", nextAttemptAt: null });
          else if (number === DOCUMENTED_ATTEMPTS)
            expect(next).toEqual({ status: "failed", nextAttemptAt: null });
          else {
            expect(next.status).toBe("pending");
            const wait = (next.nextAttemptAt ?? 0) - at;
            expect(within(wait, DOCUMENTED_WAITS[number - 1] ?? 0), `after attempt ${number}: ${wait}`).toBe(
              true,
            );
          }
        },
      ),
    );
  });

  it("never retries for attempt numbers outside the schedule", () => {
    for (const attempt of [0, -1, DOCUMENTED_ATTEMPTS, DOCUMENTED_ATTEMPTS + 1, 1.5])
      expect(nextRetryDelayMs(attempt, 0.5)).toBeUndefined();
  });
});
