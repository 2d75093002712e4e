/**
 * What the relayer's tracker sends for a pending transaction besides nothing: its bytes again (a node
 * lost them, or the fee ceiling held them until the base fee fell), or a replacement with higher fees
 * within the chain's bounds (the ceiling, `gas.max_replacements`, the hourly budget), or, when none of
 * that may go out, the reason it is held (`held_reason`), logged and counted once.
 */
import { Effect, Option } from "effect";
import type { Hex } from "viem";
import { recordMetric } from "../metrics/metrics.ts";
import type { ResolvedChain } from "./config.ts";
import { RelayerAccount } from "./relayer-account.ts";
import { budgetWindowStart, relayerBudget, spentThisHour, withinBudget } from "./relayer-budget.ts";
import {
  boundedReplacement,
  type ChainFees,
  feeCeiling,
  maxReplacements,
  mineableAt,
} from "./relayer-fees.ts";
import { type HeldReason, RelayerStore, type TransactionRow } from "./relayer-store.ts";

/**
 * Holds a transaction back for `reason`: its bytes are not sent (`send`) or not replaced
 * (`replacement`). The first time (per reason), says so in the log and metrics.
 */
export const hold = (
  chain: ResolvedChain,
  row: TransactionRow,
  reason: HeldReason,
  what: "send" | "replacement",
) =>
  Effect.gen(function* () {
    const store = yield* RelayerStore;
    if (!(yield* store.recordHeld(row.id, reason))) return;
    const labels = { chain_id: String(chain.id) };
    yield* recordMetric((m) =>
      what === "send"
        ? m.relayerFeeCeilingHolds.inc(labels)
        : m.relayerReplacementsHeld.inc({ ...labels, reason }),
    );
    yield* Effect.logWarning(
      what === "send"
        ? "relayer transaction waits: the chain's base fee is above its fee cap (gas.max_fee_per_gas_wei)"
        : "stuck relayer transaction not replaced",
    ).pipe(
      Effect.annotateLogs({
        chain: chain.id,
        nonce: row.nonce,
        purpose: row.purpose,
        reason,
        max_fee_per_gas: row.max_fee_per_gas.toString(),
        ceiling: chain.gas?.max_fee_per_gas_wei ?? "none",
      }),
    );
  });

/** Sends the bytes again; held bytes sent at last are recorded as sent (and logged). */
export const rebroadcast = (chain: ResolvedChain, row: TransactionRow) =>
  Effect.gen(function* () {
    const account = yield* RelayerAccount;
    const store = yield* RelayerStore;
    yield* account.broadcast(chain, row.raw as Hex);
    if (row.held_reason !== "fee_ceiling") return;
    yield* store.recordSent(row.id);
    yield* Effect.logInfo("relayer transaction sent: the chain's fees are within its ceiling again").pipe(
      Effect.annotateLogs({ chain: chain.id, nonce: row.nonce, purpose: row.purpose }),
    );
  });

/**
 * A stuck transaction's replacement within the chain's bounds (ceiling, count, budget: the raised cost
 * counts from now, so what the window already counts of it is set against it). Without one, bytes the
 * node lost are still sent again when the base fee allows. A transaction of a key this process no longer
 * holds (rotated out: docs/operations.md) is never replaced, only sent again while a node lacks it.
 */
export const replace = (
  chain: ResolvedChain,
  row: TransactionRow,
  current: Option.Option<ChainFees>,
  nodeHasTransaction: boolean | undefined,
) =>
  Effect.gen(function* () {
    const account = yield* RelayerAccount;
    const store = yield* RelayerStore;
    const old = { maxFeePerGas: row.max_fee_per_gas, maxPriorityFeePerGas: row.max_priority_fee_per_gas };
    const baseFee = Option.map(current, (fees) => fees.baseFeePerGas).pipe(Option.getOrUndefined);
    const mineable = (maxFee: bigint) => baseFee === undefined || mineableAt(maxFee, baseFee);
    const from = account.from(chain.id);
    if (from !== row.from_address)
      return nodeHasTransaction === false && mineable(old.maxFeePerGas)
        ? yield* rebroadcast(chain, row)
        : undefined;
    const unreplaced = (reason: HeldReason) =>
      nodeHasTransaction === false && !mineable(old.maxFeePerGas)
        ? hold(chain, row, "fee_ceiling", "send")
        : Effect.andThen(
            hold(chain, row, reason, "replacement"),
            nodeHasTransaction === false ? rebroadcast(chain, row) : Effect.void,
          );
    const decided = boundedReplacement({
      old,
      current: Option.getOrUndefined(current),
      ceiling: feeCeiling(chain),
      replacements: row.hashes.length - 1,
      maxReplacements: maxReplacements(chain),
    });
    if (decided.kind === "held") return yield* unreplaced(decided.reason);
    const { fees } = decided;
    const counted = row.signed_at >= (yield* budgetWindowStart) ? row.gas_limit * old.maxFeePerGas : 0n;
    const spent = yield* spentThisHour(store, chain, from);
    if (!withinBudget(spent, row.gas_limit * fees.maxFeePerGas - counted, relayerBudget(chain)))
      return yield* unreplaced("budget");
    const signed = yield* account.sign(chain, {
      to: row.to_address as Hex,
      data: row.data as Hex,
      nonce: row.nonce,
      gas: row.gas_limit,
      ...fees,
    });
    yield* store.recordReplacement(row.id, { ...signed, ...fees });
    yield* recordMetric((m) => m.relayerReplacements.inc({ chain_id: String(chain.id) }));
    yield* Effect.logInfo("replaced a stuck transaction with higher fees").pipe(
      Effect.annotateLogs({
        chain: chain.id,
        nonce: row.nonce,
        purpose: row.purpose,
        max_fee_per_gas: fees.maxFeePerGas.toString(),
        replacements: row.hashes.length,
      }),
    );
    // Fees raised and still below the base fee: kept until it falls (a node would refuse them now).
    if (!mineable(fees.maxFeePerGas)) return yield* hold(chain, row, "fee_ceiling", "send");
    return yield* account.broadcast(chain, signed.raw);
  });
