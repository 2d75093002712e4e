/**
 * What the relayer's tracker does with a pending transaction, decided from what the chain says. Pure,
 * so each rule is unit-tested; the tracker (relayer.ts) only gathers the inputs and applies the answer.
 */

export interface TrackingInput {
  readonly nonce: number;
  /** The status of a receipt of any hash ever broadcast for this transaction, if one exists. */
  readonly receipt: "success" | "reverted" | undefined;
  /** False when the node did not answer a receipt lookup: "no receipt" is then not known. */
  readonly receiptsAnswered: boolean;
  /** The account's mined transaction count (latest block); undefined when the node did not answer. */
  readonly minedNonce: number | undefined;
  /** Whether the node has the newest bytes in its pool; undefined when it did not answer. */
  readonly nodeHasTransaction: boolean | undefined;
  /** Time since the newest bytes were signed. */
  readonly ageMs: number;
  readonly bumpAfterMs: number;
}

export type TrackingDecision =
  | { readonly kind: "record"; readonly status: "mined" | "reverted" }
  /** Our nonce was used by a transaction we never recorded: this one can no longer be mined. */
  | { readonly kind: "superseded" }
  /** The node lost the bytes (restart, eviction): send the same bytes again. */
  | { readonly kind: "rebroadcast" }
  /** Next in line and unmined for too long: the same nonce with higher fees. */
  | { readonly kind: "replace" }
  /** The node has it and it is young, or waits behind a lower nonce: nothing to send. */
  | { readonly kind: "wait" };

export const decideTracking = (input: TrackingInput): TrackingDecision => {
  if (input.receipt !== undefined)
    return { kind: "record", status: input.receipt === "success" ? "mined" : "reverted" };
  if (input.minedNonce === undefined) return { kind: "wait" };
  // A lookup that failed (a timeout under load) proves nothing: marking a mined transaction superseded
  // fails its charges and tells merchants so, until the chain's facts say otherwise.
  if (input.minedNonce > input.nonce)
    return input.receiptsAnswered ? { kind: "superseded" } : { kind: "wait" };
  // Higher fees help only the next nonce to mine; a later one waits for it (or for a gap to be filled).
  const nextInLine = input.minedNonce === input.nonce;
  if (nextInLine && input.ageMs >= input.bumpAfterMs) return { kind: "replace" };
  if (input.nodeHasTransaction === false) return { kind: "rebroadcast" };
  return { kind: "wait" };
};

/**
 * Nonces that nothing of ours will ever fill, below a pending transaction of ours: after a chain lost
 * blocks (a local chain restored from an older state), transactions we recorded as mined are gone, and
 * every later one waits in the node's pool behind the hole forever. `poolNonce` is the node's pending
 * transaction count (mined plus those it can mine next in a row); our pending transactions at or above it
 * are queued behind a hole unless every nonce below them is pending with us too.
 */
export const nonceGaps = (poolNonce: number, pendingNonces: readonly number[]): number[] => {
  const ours = new Set(pendingNonces);
  const highest = Math.max(-1, ...pendingNonces);
  const gaps: number[] = [];
  for (let nonce = poolNonce; nonce < highest; nonce++) if (!ours.has(nonce)) gaps.push(nonce);
  return gaps;
};

/**
 * Gas limit for the gas one simulated run used: that figure is net of refunds (at most a fifth of it,
 * EIP-3529) and the run had its access list warm, so the limit keeps 50% of headroom: refund, the 63/64
 * rule, cold accesses and a little state change before it is mined.
 */
export const gasLimitForUsed = (used: bigint): bigint => (used * 3n) / 2n;

/**
 * Fees of a replacement: each at least 12.5% above the old one (nodes require 10%) and no less than
 * the chain asks now; the fee cap never below the tip.
 */
export const replacementFees = (
  old: { readonly maxFeePerGas: bigint; readonly maxPriorityFeePerGas: bigint },
  current: { readonly maxFeePerGas: bigint; readonly maxPriorityFeePerGas: bigint } | undefined,
) => {
  const larger = (a: bigint, b: bigint) => (a > b ? a : b);
  const bump = (previous: bigint, now: bigint | undefined) =>
    larger((previous * 1125n) / 1000n + 1n, now ?? 0n);
  const maxPriorityFeePerGas = bump(old.maxPriorityFeePerGas, current?.maxPriorityFeePerGas);
  const maxFeePerGas = larger(bump(old.maxFeePerGas, current?.maxFeePerGas), maxPriorityFeePerGas);
  return { maxFeePerGas, maxPriorityFeePerGas };
};

/** Whether a transaction costing at most `cost` wei fits the hourly budget after `spent`. */
export const withinBudget = (spent: bigint, cost: bigint, budget: bigint): boolean => spent + cost <= budget;
