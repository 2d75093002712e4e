/**
 * Sending an all-or-nothing escrow batch (`chargeMany`, `releaseMany`, `releasePayments`, `sweep`) when
 * any item may fail alone: the batch is run once whole, which also measures the gas the relayer needs;
 * when it would revert, it is split in halves (find-failures.ts) until each failing item stands alone
 * with its revert, so the rest can go out together in the same pass (`submitPassing`, one relayer
 * transaction).
 */
import { Effect, Option } from "effect";
import type { SqlError } from "effect/sql";
import type { Hex } from "viem";
import {
  ChainClients,
  type ChainUnavailable,
  type EscrowFunction,
  type EscrowRevert,
  escrowCallData,
} from "./chain-clients.ts";
import type { ResolvedChain } from "./config.ts";
import { findFailures } from "./find-failures.ts";
import { Relayer } from "./relayer.ts";

export interface EscrowCall {
  readonly functionName: EscrowFunction;
  readonly args: readonly unknown[];
}

export interface Isolated<T> {
  /** The items that would succeed together, in their order. */
  readonly passing: ReadonlyArray<T>;
  /** Gas of `passing` as one call, when the whole batch was that call and it ran. */
  readonly gasUsed: bigint | undefined;
  /** The items that fail alone, with the revert of each. */
  readonly failing: ReadonlyArray<{ readonly item: T; readonly revert: EscrowRevert }>;
}

/**
 * Splits `batch` into the items whose call (`call` of them together, or of one alone) would succeed and
 * those that fail alone. One run when the batch succeeds; about 2·k·log₂(n) simulations for k failures
 * among n.
 */
export const isolateFailures = <T>(
  chain: ResolvedChain,
  from: Hex,
  batch: ReadonlyArray<T>,
  call: (items: ReadonlyArray<T>) => EscrowCall,
): Effect.Effect<Isolated<T>, ChainUnavailable, ChainClients> =>
  Effect.gen(function* () {
    const clients = yield* ChainClients;
    const whole = call(batch);
    const measured = yield* clients
      .measureEscrow(chain, from, whole.functionName, whole.args)
      .pipe(Effect.option);
    if (Option.isSome(measured)) return { passing: batch, gasUsed: measured.value, failing: [] };
    const simulate = (items: ReadonlyArray<T>) => {
      const c = call(items);
      return clients.simulateOutcome(chain, from, c.functionName, c.args);
    };
    const reverts = yield* findFailures(
      batch,
      (items) => Effect.map(simulate(items), (revert) => revert === undefined),
      (item) => simulate([item]),
    );
    const passing: T[] = [];
    const failing: Array<{ item: T; revert: EscrowRevert }> = [];
    for (const [i, item] of batch.entries()) {
      const revert = reverts[i];
      if (revert === undefined) passing.push(item);
      else failing.push({ item, revert });
    }
    return { passing, gasUsed: undefined, failing };
  });

/**
 * Sends `sending` (what passed isolation, less what the caller keeps back) as one escrow call through the
 * relayer, with the isolation's gas when that measured exactly this batch. False when the relayer
 * refused (logged as `what`; the items stay due and are tried again next pass).
 */
export const submitPassing = <T>(
  chain: ResolvedChain,
  isolated: Isolated<T>,
  sending: ReadonlyArray<T>,
  call: (items: ReadonlyArray<T>) => EscrowCall,
  purpose: string,
  what: string,
): Effect.Effect<boolean, SqlError.SqlError, Relayer> =>
  Effect.gen(function* () {
    const relayer = yield* Relayer;
    const c = call(sending);
    const whole = sending.length === isolated.passing.length + isolated.failing.length;
    return yield* relayer
      .submit(chain.id, {
        to: chain.escrow.address,
        data: escrowCallData(c.functionName, c.args),
        purpose,
        ...(whole && isolated.gasUsed !== undefined ? { gasUsed: isolated.gasUsed } : {}),
      })
      .pipe(
        Effect.as(true),
        Effect.catchTag("RelayerError", (error) =>
          Effect.as(
            Effect.logWarning(`${what} not submitted; will retry`).pipe(
              Effect.annotateLogs({ chain: chain.id, items: sending.length, reason: error.message }),
            ),
            false,
          ),
        ),
      );
  });
