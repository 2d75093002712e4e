/**
 * What the relayer offers per gas: the chain's fees read once per head, bounded by the chain's ceiling
 * (`gas.max_fee_per_gas_wei`, `gas.max_priority_fee_per_gas_wei`). No transaction is signed above the
 * ceiling, first send or replacement; while the base fee alone is above a transaction's fee cap the
 * transaction cannot be mined, so it is kept and not sent (some nodes refuse it, anvil among them) until
 * the base fee falls. The decisions are pure and unit-tested; `RelayerFees` reads the chain.
 * Waiting, recorded, rather than refusing with a 503: a refusal would make every caller (billing,
 * releases, sweeps) retry on its own schedule and lose its place in the nonce order, while held bytes
 * keep the caller's answer (a pending charge) as usual.
 */
import { Context, Effect, Layer, Option } from "effect";
import { ChainClients } from "./chain-clients.ts";
import { ChainHeads } from "./chain-heads.ts";
import { DEFAULT_MAX_REPLACEMENTS, type ResolvedChain } from "./config.ts";
import { ChainRegistry } from "./registry.ts";
import { RelayerAccount, type RelayerError } from "./relayer-account.ts";

export interface Fees {
  readonly maxFeePerGas: bigint;
  readonly maxPriorityFeePerGas: bigint;
}

/** What the chain asks now: its latest block's base fee and the fees a transaction should offer. */
export interface ChainFees extends Fees {
  readonly baseFeePerGas: bigint;
}

/** The chain's ceiling per gas; an absent field bounds nothing. */
export interface FeeCeiling {
  readonly maxFeePerGas?: bigint;
  readonly maxPriorityFeePerGas?: bigint;
}

export const feeCeiling = (chain: ResolvedChain): FeeCeiling => ({
  ...(chain.gas?.max_fee_per_gas_wei === undefined
    ? {}
    : { maxFeePerGas: BigInt(chain.gas.max_fee_per_gas_wei) }),
  ...(chain.gas?.max_priority_fee_per_gas_wei === undefined
    ? {}
    : { maxPriorityFeePerGas: BigInt(chain.gas.max_priority_fee_per_gas_wei) }),
});

export const maxReplacements = (chain: ResolvedChain): number =>
  chain.gas?.max_replacements ?? DEFAULT_MAX_REPLACEMENTS;

const least = (a: bigint, b: bigint | undefined) => (b !== undefined && b < a ? b : a);
const most = (a: bigint, b: bigint) => (a > b ? a : b);

/** Fees within the ceiling; the tip never above the fee cap. */
export const capFees = (fees: Fees, ceiling: FeeCeiling): Fees => {
  const maxFeePerGas = least(fees.maxFeePerGas, ceiling.maxFeePerGas);
  return {
    maxFeePerGas,
    maxPriorityFeePerGas: least(least(fees.maxPriorityFeePerGas, ceiling.maxPriorityFeePerGas), maxFeePerGas),
  };
};

/** Whether a transaction offering `maxFeePerGas` can be mined at the base fee `baseFeePerGas`. */
export const mineableAt = (maxFeePerGas: bigint, baseFeePerGas: bigint): boolean =>
  baseFeePerGas <= maxFeePerGas;

/**
 * The fees of a new transaction: the chain's, within the ceiling; `waits` when the base fee alone is
 * above the capped fee (the transaction is recorded and sent once the base fee falls).
 */
export const feesForNew = (asked: ChainFees, ceiling: FeeCeiling): { fees: Fees; waits: boolean } => {
  const fees = capFees(asked, ceiling);
  return { fees, waits: !mineableAt(fees.maxFeePerGas, asked.baseFeePerGas) };
};

/**
 * Fees of an unbounded replacement: each at least 12.5% above the old one (nodes require 10%) and no
 * less than the chain asks now; the fee cap never below the tip.
 */
export const replacementFees = (old: Fees, current: Fees | undefined): Fees => {
  const bump = (previous: bigint, now: bigint | undefined) =>
    most((previous * 1125n) / 1000n + 1n, now ?? 0n);
  const maxPriorityFeePerGas = bump(old.maxPriorityFeePerGas, current?.maxPriorityFeePerGas);
  const maxFeePerGas = most(bump(old.maxFeePerGas, current?.maxFeePerGas), maxPriorityFeePerGas);
  return { maxFeePerGas, maxPriorityFeePerGas };
};

/** Nodes take a replacement of a pending transaction only with both fees at least 10% higher. */
const accepted = (next: Fees, old: Fees) =>
  next.maxFeePerGas * 100n >= old.maxFeePerGas * 110n &&
  next.maxPriorityFeePerGas * 100n >= old.maxPriorityFeePerGas * 110n;

export type Replacement =
  | { readonly kind: "replace"; readonly fees: Fees }
  /** No replacement: the transaction already had its `max_replacements`, or the ceiling leaves no 10% room. */
  | { readonly kind: "held"; readonly reason: "replacement_limit" | "fee_ceiling" };

/** A stuck transaction's replacement within the chain's bounds, or why there is none. */
export const boundedReplacement = (input: {
  readonly old: Fees;
  readonly current: Fees | undefined;
  readonly ceiling: FeeCeiling;
  readonly replacements: number;
  readonly maxReplacements: number;
}): Replacement => {
  if (input.replacements >= input.maxReplacements) return { kind: "held", reason: "replacement_limit" };
  const fees = capFees(replacementFees(input.old, input.current), input.ceiling);
  return accepted(fees, input.old) ? { kind: "replace", fees } : { kind: "held", reason: "fee_ceiling" };
};

/** viem's own rule for the fee cap: 1.2 × the base fee plus the tip, room for the next blocks' rises. */
const offeredFees = (baseFeePerGas: bigint, maxPriorityFeePerGas: bigint): ChainFees => ({
  baseFeePerGas,
  maxPriorityFeePerGas,
  maxFeePerGas: (baseFeePerGas * 12n) / 10n + maxPriorityFeePerGas,
});

const make = Effect.gen(function* () {
  const clients = yield* ChainClients;
  const heads = yield* ChainHeads;
  const account = yield* RelayerAccount;
  for (const chain of (yield* ChainRegistry).all)
    if (chain.local === undefined && chain.gas?.max_fee_per_gas_wei === undefined)
      yield* Effect.logWarning(
        "chain without a fee ceiling (gas.max_fee_per_gas_wei): the relayer offers whatever the chain asks",
      ).pipe(Effect.annotateLogs({ chain: chain.id }));

  const read = (chain: ResolvedChain) =>
    account.rpc("fees", async () => {
      const client = clients.client(chain);
      // Asked together: one JSON-RPC batch.
      const [block, tip] = await Promise.all([
        client.getBlock({ blockTag: "latest" }),
        client.estimateMaxPriorityFeePerGas(),
      ]);
      return offeredFees(block.baseFeePerGas ?? 0n, tip);
    });

  // The fees read at each chain's newest head, shared by every submission until the next head (the
  // base fee changes only with a block).
  const atHead = new Map<
    number,
    { readonly head: bigint; readonly fees: Effect.Effect<ChainFees, RelayerError> }
  >();
  const current = (chain: ResolvedChain): Effect.Effect<ChainFees, RelayerError> =>
    Effect.gen(function* () {
      const head = yield* heads.latestBlock(chain).pipe(Effect.option);
      if (Option.isNone(head)) return yield* read(chain);
      const known = atHead.get(chain.id);
      if (known !== undefined && known.head === head.value.number) return yield* known.fees;
      const once = yield* Effect.cached(read(chain));
      atHead.set(chain.id, { head: head.value.number, fees: once });
      // A failed read is not kept: the next caller asks again.
      return yield* once.pipe(Effect.tapError(() => Effect.sync(() => atHead.delete(chain.id))));
    });

  return {
    /** The chain's fees now (read at most once per head). */
    current,
    /** A new transaction's fees within the chain's ceiling, and whether it must wait for the base fee. */
    forNew: (chain: ResolvedChain) =>
      Effect.map(current(chain), (asked) => feesForNew(asked, feeCeiling(chain))),
  };
});

export class RelayerFees extends Context.Service<RelayerFees>()("RelayerFees", { make }) {
  static readonly layer = Layer.effect(RelayerFees, make);
}
