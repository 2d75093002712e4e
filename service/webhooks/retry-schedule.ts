/**
 * When a failed delivery is tried again. The first attempt is immediate; after each failure the wait
 * grows (30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, 8 h, then 12 h three times), each wait jittered by
 * ±10 % so endpoints recovering from an outage are not hit by every retry at once. Twelve attempts
 * span about two days (nominally 51 h 42 min); after the twelfth failure the delivery is `failed`.
 */

const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** Nominal wait after the n-th failed attempt (index 0 = after the first attempt). */
export const RETRY_WAITS_MS: readonly number[] = [
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

export const MAX_ATTEMPTS = RETRY_WAITS_MS.length + 1;
export const JITTER = 0.1;

/**
 * The wait before the next attempt after `attemptsMade` failed attempts, or undefined when the delivery
 * has had all its attempts. `random` is in [0, 1): the source of jitter (Math.random in the dispatcher).
 */
export const nextRetryDelayMs = (attemptsMade: number, random: number): number | undefined => {
  const nominal = RETRY_WAITS_MS[attemptsMade - 1];
  if (nominal === undefined || attemptsMade < 1) return undefined;
  return Math.round(nominal * (1 - JITTER + 2 * JITTER * Math.min(Math.max(random, 0), 1)));
};

/** What an outcome does to its delivery: succeeded, failed for good, or retried later. */
export const nextState = (
  number: number,
  ok: boolean,
  attemptedAt: number,
  random: number,
): { status: "succeeded" | "failed" | "pending"; nextAttemptAt: number | null } => {
  if (ok) return { status: "succeeded", nextAttemptAt: null };
  const delay = nextRetryDelayMs(number, random);
  return delay === undefined
    ? { status: "failed", nextAttemptAt: null }
    : { status: "pending", nextAttemptAt: attemptedAt + delay };
};
