/**
 * Escrow transfers the chain refuses for one item of a batch: a release to a payee, a sweep of a deposit
 * address. The escrow's batches are all-or-nothing, so one refused item would stop every other
 * merchant's on the chain; the workers split a refused batch (batch-isolation.ts), send the rest, and
 * hold the refused items back here:
 *
 * - why (`TransferFailureCode`): the token's blacklist names the payout address or the deposit
 *   address, or the token refused for a reason the service cannot attribute;
 * - until when: as long again as the item has been held back, 1 to 15 minutes between attempts,
 *   so a held item costs a simulation every few minutes and no gas; sooner once `isBlacklisted` says
 *   the address it names was cleared;
 * - one event per episode (from the first refusal to the next successful submission), keyed by the
 *   time the episode began.
 *
 * A paused token is not an item's failure: nothing of that token is sent while it is paused
 * (token-states.ts), and its items are left as they are.
 */
import { Duration, Effect, Schema } from "effect";
import type { EscrowRevert } from "./chain-clients.ts";
import type { ResolvedChain } from "./config.ts";
import { TokenStates } from "./token-states.ts";

export const TRANSFER_FAILURE_CODES = [
  "payout_address_blocked",
  "deposit_address_blocked",
  "transfer_refused",
] as const;
export type TransferFailureCode = (typeof TRANSFER_FAILURE_CODES)[number];

/** Circle's USDC reverts with these reasons (FiatToken v2.2); the escrow passes them on. */
const PAUSED_REASON = "Pausable: paused";
const BLACKLISTED_REASON = "Blacklistable: account is blacklisted";

export type TokenRefusal = "paused" | "blacklisted";

/** What a revert says about the token's issuer: it paused the token, or blacklisted an address. Pure. */
export const tokenRefusal = (
  revert: Pick<EscrowRevert, "errorName" | "reason"> | undefined,
): TokenRefusal | undefined => {
  if (revert?.errorName !== "Error") return undefined;
  if (revert.reason === PAUSED_REASON) return "paused";
  if (revert.reason === BLACKLISTED_REASON) return "blacklisted";
  return undefined;
};

export const MIN_HOLD_BACK = Duration.minutes(1);
export const MAX_HOLD_BACK = Duration.minutes(15);

/**
 * When an item held back since `since` (ms) and refused again at `now` is tried next: after as long
 * again as it has been held back, 1 to 15 minutes (1, 2, 4, 8 and 16 minutes after the first refusal,
 * then every 15).
 */
export const nextAttemptAt = (since: number, now: number): number =>
  now + Math.min(Math.max(now - since, Duration.toMillis(MIN_HOLD_BACK)), Duration.toMillis(MAX_HOLD_BACK));

/** An item the chain refused alone. */
export interface TransferFailure {
  readonly code: TransferFailureCode;
  readonly message: string;
  /** The address whose clearing should end the hold (its `isBlacklisted` is asked before the time is up). */
  readonly blocked: string | null;
}

/** What one item's revert, found alone, calls for. */
export type ItemVerdict =
  | { readonly kind: "failed"; readonly failure: TransferFailure }
  /** The token is paused: leave every item of it as it is (the watch already knows, or knows now). */
  | { readonly kind: "paused" }
  /** Nothing to hold back: released or swept by someone else meanwhile, or its time is not yet. */
  | { readonly kind: "skip" };

/** Reverts that do not make an item fail: it was released by someone else, or its hold is not over by the pending block. */
const NOT_FAILURES = new Set(["NoHold", "HoldNotOver"]);

/**
 * Why an escrow transfer of `token` failed alone: whose blacklisting (the payee's or the deposit
 * address's, read with `isBlacklisted`), the token's pause, or another refusal.
 */
export const explainTransfer = (
  chain: ResolvedChain,
  token: string,
  revert: EscrowRevert,
  parties: { readonly payee: string; readonly deposit?: string },
): Effect.Effect<ItemVerdict, never, TokenStates> =>
  Effect.gen(function* () {
    const states = yield* TokenStates;
    if (NOT_FAILURES.has(revert.errorName)) return { kind: "skip" } as const;
    const refusal = tokenRefusal(revert);
    if (refusal === "paused") {
      yield* states.notePaused(chain, token);
      return { kind: "paused" } as const;
    }
    const payee = parties.payee.toLowerCase();
    const deposit = parties.deposit?.toLowerCase();
    const listed =
      refusal === "blacklisted"
        ? yield* states
            .blacklisted(chain, token, deposit === undefined ? [payee] : [payee, deposit])
            .pipe(Effect.orElseSucceed(() => new Set<string>()))
        : new Set<string>();
    const failure: TransferFailure = listed.has(payee)
      ? {
          code: "payout_address_blocked",
          message: `The token's issuer has blacklisted your payout address ${payee}, so the token cannot be sent to it. The funds stay where they are and move by themselves once the address is cleared.`,
          blocked: payee,
        }
      : deposit !== undefined && listed.has(deposit)
        ? {
            code: "deposit_address_blocked",
            message: `The token's issuer has blacklisted the deposit address ${deposit}, so its funds cannot be moved. They stay there and move by themselves once the address is cleared.`,
            blocked: deposit,
          }
        : {
            code: "transfer_refused",
            message: `The chain refused the transfer (${revert.reason ?? revert.errorName}). It is tried again later.`,
            blocked: null,
          };
    return { kind: "failed", failure } as const;
  });

/** An item held back, as the API shows it (`release_failure`, `sweep_failure`). */
export const TransferFailureObject = Schema.Struct({
  code: Schema.Literals(TRANSFER_FAILURE_CODES).annotate({
    description:
      "payout_address_blocked: the token's issuer blacklisted your payout address; deposit_address_blocked: it blacklisted the payment's deposit address; transfer_refused: the chain refused the transfer for another reason (the message says which)",
  }),
  message: Schema.String,
  since: Schema.Int.annotate({ description: "Unix seconds: when the transfer was first refused" }),
  next_attempt: Schema.Int.annotate({
    description:
      "Unix seconds: the latest time the service tries again (sooner once the blacklisted address is cleared)",
  }),
}).annotate({ identifier: "TransferFailure" });
export type TransferFailureObject = typeof TransferFailureObject.Type;

/** The stored columns of a held-back item as its API object (null when nothing is held back). */
export const transferFailureObject = (
  code: TransferFailureCode | null,
  message: string | null,
  since: Date | null,
  retryAt: Date | null,
): TransferFailureObject | null =>
  code === null || since === null
    ? null
    : {
        code,
        message: message ?? "",
        since: Math.floor(since.getTime() / 1000),
        next_attempt: Math.ceil((retryAt ?? since).getTime() / 1000),
      };
