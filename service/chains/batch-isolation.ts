/**
 * Sending an all-or-nothing escrow batch (`chargeMany`, `releaseMany`, `releasePayments`, `sweep`) when
 * any item may fail alone: the batch is run once whole, which also measures the gas the relayer needs;
 * when it would revert, it is split in halves (find-failures.ts) until each failing item stands alone
 * with its revert, so the rest can go out together in the same pass (`submitPassing`, one relayer
 * transaction).
 */
import { Effect, Option, Result } from "effect";
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
 * relayer, with the isolation's gas when that measured exactly this batch; `merchantOf` names each item's
 * merchant, whose share of the relayer's budget its part counts against (relayer-shares.ts). The items of
 * merchants whose share has no room are left out and the rest sent, so one merchant's spending never
 * holds back another's. Returns the items sent: none when the relayer refused (logged as `what`; the
 * items stay due and are tried again next pass), fewer than `sending` when merchants were left out.
 */
export const submitPassing = <T>(
  chain: ResolvedChain,
  isolated: Isolated<T>,
  sending: ReadonlyArray<T>,
  call: (items: ReadonlyArray<T>) => EscrowCall,
  purpose: string,
  what: string,
  merchantOf: (item: T) => string,
): Effect.Effect<ReadonlyArray<T>, SqlError.SqlError, Relayer> =>
  Effect.gen(function* () {
    const relayer = yield* Relayer;
    const leftOut = new Set<string>();
    let items = sending;
    while (items.length > 0) {
      const c = call(items);
      const whole = items.length === isolated.passing.length + isolated.failing.length;
      const submitted = yield* relayer
        .submit(chain.id, {
          to: chain.escrow.address,
          data: escrowCallData(c.functionName, c.args),
          purpose,
          ...(whole && isolated.gasUsed !== undefined ? { gasUsed: isolated.gasUsed } : {}),
          merchants: items.map(merchantOf),
        })
        .pipe(Effect.result);
      if (Result.isSuccess(submitted)) return items;
      const error = submitted.failure;
      if (error._tag !== "RelayerError") return yield* error;
      const merchants = error.reason === "merchant_share_exhausted" ? (error.merchants ?? []) : [];
      if (merchants.length === 0) {
        yield* Effect.logWarning(`${what} not submitted; will retry`).pipe(
          Effect.annotateLogs({ chain: chain.id, items: items.length, reason: error.message }),
        );
        return [];
      }
      for (const merchant of merchants) leftOut.add(merchant);
      items = items.filter((item) => !leftOut.has(merchantOf(item)));
      yield* Effect.logInfo(
        `${what}: items of merchants whose share of the relayer budget is spent left for later`,
      ).pipe(
        Effect.annotateLogs({ chain: chain.id, merchants: [...leftOut].join(","), items: items.length }),
      );
    }
    return [];
  });
