/**
 * Authorisations sent together: the relayer puts the customers' signatures submitted at about the same
 * time on a chain into one `authorizeMany` transaction. The escrow skips an item it refuses (with
 * `AuthorizationSkipped(mandateId, nonce, reason)`) and records the others, so each item keeps its own
 * outcome: the relayer records one row per item (its purpose and action, as a lone `authorize` had)
 * beside the row of the transaction that carries them.
 */
import { type Duration, Effect, Queue } from "effect";
import { type Hex, type Log, parseEventLogs, zeroHash } from "viem";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { escrowCallData } from "./chain-clients.ts";

/** What every relayer action for one mandate's signatures starts with (its daily limit counts them). */
export const authorizationPrefix = (chainId: number, onchainId: string) =>
  `authorize:${chainId}:${onchainId.toLowerCase()}:`;

/**
 * The relayer action of one signature version of a mandate. Each attempt is a transaction (or an item
 * of one) of its own (`<action>:<id>`): after one fails, the same signature can be sent again; while
 * one is pending or mined, submitting again returns it.
 */
export const authorizationAction = (chainId: number, onchainId: string, nonce: bigint) =>
  `${authorizationPrefix(chainId, onchainId)}${nonce}`;

/** One customer's signed terms, with the token permit signed beside them when there is one. */
export interface AuthorizationItem {
  /** The escrow's `Terms` struct as signed (mandateId, payee, ..., nonce, deadline). */
  readonly terms: { readonly mandateId: Hex; readonly nonce: bigint };
  readonly signature: Hex;
  readonly permit: {
    readonly value: bigint;
    readonly deadline: bigint;
    readonly v: number;
    readonly r: Hex;
    readonly s: Hex;
  } | null;
}

/** `deadline` 0 tells the escrow that an item comes without a permit. */
const NO_PERMIT = { value: 0n, deadline: 0n, v: 0, r: zeroHash, s: zeroHash };

export const authorizeManyData = (items: ReadonlyArray<AuthorizationItem>): Hex =>
  escrowCallData("authorizeMany", [
    items.map((item) => item.terms),
    items.map((item) => item.signature),
    items.map((item) => item.permit ?? NO_PERMIT),
  ]);

/** The actions whose items the escrow skipped, read from a receipt's logs of the chain's escrow. */
export const skippedActions = (chainId: number, escrow: Hex, logs: ReadonlyArray<Log>): string[] =>
  parseEventLogs({ abi: MandateEscrowAbi, eventName: "AuthorizationSkipped", logs: [...logs] })
    .filter((log) => log.address.toLowerCase() === escrow.toLowerCase())
    .map((log) => authorizationAction(chainId, log.args.mandateId, BigInt(log.args.nonce)));

/**
 * The next group from a chain's queue of waiting authorisations: waits for the first, gathers what
 * arrives within `window` after it, and takes at most `max` (the rest wait for the next group). The
 * caller must be the queue's only taker: what `size` counts is then there to take without waiting.
 */
export const takeGroup = <A>(queue: Queue.Queue<A>, max: number, window: Duration.Input) =>
  Effect.gen(function* () {
    const first = yield* Queue.takeBetween(queue, 1, max);
    yield* Effect.sleep(window);
    const more = Math.min(yield* Queue.size(queue), max - first.length);
    return more > 0 ? [...first, ...(yield* Queue.takeBetween(queue, 1, more))] : first;
  });
