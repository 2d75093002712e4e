/**
 * What the relayer's tracker does with a pending transaction, decided from what the chain says. Pure,
 * so each rule is unit-tested; the tracker (relayer-tracker.ts) only gathers the inputs and applies the
 * answer.
 */
import { Option, Schema } from "effect";

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
  /** The chain's base fee now; undefined when it could not be read. */
  readonly baseFeePerGas: bigint | undefined;
  /** The fee cap the newest bytes offer. */
  readonly maxFeePerGas: bigint;
}

export type TrackingDecision =
  | { readonly kind: "record"; readonly status: "mined" | "reverted" }
  /** Our nonce was used by a transaction we never recorded: this one can no longer be mined. */
  | { readonly kind: "superseded" }
  /** The node lost the bytes (restart, eviction): send the same bytes again. */
  | { readonly kind: "rebroadcast" }
  /** Next in line and unmined for too long: the same nonce with higher fees. */
  | { readonly kind: "replace" }
  /** The node lacks the bytes and they cannot be mined at the base fee now: keep them until it falls. */
  | { readonly kind: "hold_for_fees" }
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
  if (input.nodeHasTransaction === false)
    return input.baseFeePerGas !== undefined && input.baseFeePerGas > input.maxFeePerGas
      ? { kind: "hold_for_fees" }
      : { kind: "rebroadcast" };
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

const Quantity = Schema.Union([
  Schema.BigInt,
  Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]{1,64}$/)),
]);
const decodeL1Fee = Schema.decodeUnknownOption(Schema.Struct({ l1Fee: Quantity }));

/**
 * The L1 data fee an OP-stack receipt reports (`l1Fee`, paid on top of gas used × effective price);
 * undefined for a receipt without one. viem passes fields it does not know through unformatted (hex).
 */
export const l1FeeOf = (receipt: unknown): bigint | undefined =>
  Option.match(decodeL1Fee(receipt), {
    onNone: () => undefined,
    onSome: ({ l1Fee }) => (typeof l1Fee === "bigint" ? l1Fee : BigInt(l1Fee)),
  });
