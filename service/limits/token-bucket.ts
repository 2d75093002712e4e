/**
 * Token-bucket arithmetic, pure: a bucket holds at most `capacity` tokens, refills at `perSecond`, and
 * each request takes one. Times are seconds (fractions allowed) on one clock, the database's for the
 * shared buckets (limits/request-buckets.ts). The service's API limits use a capacity of one second of
 * the rate: `perSecond` requests a second, in a burst of at most as many.
 */

export interface BucketPolicy {
  /** Tokens added a second; > 0. */
  readonly perSecond: number;
  /** Most tokens the bucket holds (the largest burst); ≥ 1. */
  readonly capacity: number;
}

export interface BucketState {
  /** Tokens in the bucket when it was last counted (fractional: refilling goes on between requests). */
  readonly tokens: number;
  /** When it was last counted, in seconds. */
  readonly at: number;
}

export interface Taken {
  /** Tokens taken: the lesser of those asked for and the whole tokens there were; 0 when empty. */
  readonly granted: number;
  readonly state: BucketState;
  /** Seconds until the bucket holds a whole token again: 0 when one is left, > 0 otherwise. */
  readonly waitSeconds: number;
}

/** A bucket nobody has taken from yet: full. */
export const fullBucket = (policy: BucketPolicy, at: number): BucketState => ({
  tokens: policy.capacity,
  at,
});

/** Tokens in the bucket at `now`: what was left plus the refill, never above its capacity. */
export const tokensAt = (policy: BucketPolicy, state: BucketState, now: number): number => {
  // A clock that went back counts as no time passed; a bucket above its capacity (a policy lowered
  // since it was counted) holds its capacity.
  const elapsed = Math.max(0, now - state.at);
  const refilled = state.tokens + elapsed * policy.perSecond;
  return Math.max(0, Math.min(policy.capacity, Number.isFinite(refilled) ? refilled : policy.capacity));
};

/** Seconds until a bucket holding `tokens` has `target` of them, at the policy's rate. */
export const secondsUntil = (policy: BucketPolicy, tokens: number, target: number): number =>
  tokens >= target ? 0 : (target - tokens) / policy.perSecond;

/**
 * A billionth of a token: a refill computed from seconds in floating point can fall that short of the
 * whole token it should have made (0.04 s at 25 a second gives 0.99999999999 tokens).
 */
const ROUNDING = 1e-9;

/** Takes up to `want` tokens at `now`. */
export const take = (policy: BucketPolicy, state: BucketState, now: number, want: number): Taken => {
  const tokens = tokensAt(policy, state, now);
  const granted = Math.max(0, Math.min(Math.floor(want), Math.floor(tokens + ROUNDING)));
  const left = Math.max(0, tokens - granted);
  return {
    granted,
    state: { tokens: left, at: Math.max(now, state.at) },
    waitSeconds: secondsUntil(policy, left + ROUNDING, 1),
  };
};

/** `Retry-After` for a wait: whole seconds, never 0 (a client told 0 would retry at once, and be refused). */
export const retryAfterSeconds = (waitSeconds: number): number =>
  Math.max(1, Math.ceil(Number.isFinite(waitSeconds) ? waitSeconds : 1));
