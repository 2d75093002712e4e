/**
 * The relayer's native balance per chain, against the chain's thresholds: below `gas.low_balance_wei`
 * it alerts (`billing_relayer_balance_low` is 1, and a warning is logged when it goes below and when it
 * comes back); below `gas.min_balance_wei` new submissions are refused (`balance_below_floor`, which
 * the API answers with 503 `relayer_balance_low`) while transactions already sent are still tracked and
 * replaced. The indexer watchdog reads the balance every few seconds; a submission uses that reading
 * while it is recent and reads it itself otherwise.
 */
import { Clock, Context, Duration, Effect, Layer, Option } from "effect";
import { recordMetric } from "../metrics/metrics.ts";
import { ChainClients } from "./chain-clients.ts";
import type { ResolvedChain } from "./config.ts";
import { RelayerAccount, RelayerError } from "./relayer-account.ts";

export type BalanceLevel = "ok" | "low" | "below_floor";

/** Where a balance stands against the chain's thresholds (an absent threshold never trips). */
export const balanceLevel = (chain: ResolvedChain, balance: bigint): BalanceLevel => {
  const floor = chain.gas?.min_balance_wei;
  const low = chain.gas?.low_balance_wei;
  if (floor !== undefined && balance < BigInt(floor)) return "below_floor";
  if (low !== undefined && balance < BigInt(low)) return "low";
  return "ok";
};

/** A reading younger than this serves a submission without asking the chain. */
const FRESH_MS = 10_000;
const READ_TIMEOUT = Duration.seconds(3);

const make = Effect.gen(function* () {
  const clients = yield* ChainClients;
  const account = yield* RelayerAccount;
  const readings = new Map<number, { readonly balance: bigint; readonly at: number }>();
  const levels = new Map<number, BalanceLevel>();

  /** Keeps a reading, sets the gauges, and logs a change of level. */
  const observe = (chain: ResolvedChain, balance: bigint) =>
    Effect.gen(function* () {
      readings.set(chain.id, { balance, at: yield* Clock.currentTimeMillis });
      const level = balanceLevel(chain, balance);
      const labels = { chain_id: String(chain.id) };
      yield* recordMetric((m) => {
        m.relayerBalanceLow.set(labels, level === "ok" ? 0 : 1);
        m.relayerBalanceBelowFloor.set(labels, level === "below_floor" ? 1 : 0);
      });
      const was = levels.get(chain.id) ?? "ok";
      levels.set(chain.id, level);
      if (level === was) return;
      const details = {
        chain: chain.id,
        balance_wei: balance.toString(),
        low_balance_wei: chain.gas?.low_balance_wei ?? "none",
        min_balance_wei: chain.gas?.min_balance_wei ?? "none",
      };
      if (level === "ok")
        yield* Effect.logInfo("relayer balance back above its thresholds").pipe(Effect.annotateLogs(details));
      else if (level === "low")
        yield* Effect.logWarning("relayer balance low: top up the relayer account").pipe(
          Effect.annotateLogs(details),
        );
      else
        yield* Effect.logError(
          "relayer balance below its floor: new transactions are refused until topped up",
        ).pipe(Effect.annotateLogs(details));
    });

  /** Reads the balance now; undefined without a key or an answer. */
  const read = (chain: ResolvedChain) =>
    Effect.gen(function* () {
      const address = account.address(chain.id);
      if (address === undefined) return undefined;
      const balance = yield* clients
        .rpc(chain, "relayer balance", () => clients.client(chain).getBalance({ address }))
        .pipe(Effect.timeout(READ_TIMEOUT), Effect.option, Effect.map(Option.getOrUndefined));
      if (balance !== undefined) yield* observe(chain, balance);
      return balance;
    });

  /** The balance as last read, if within FRESH_MS, else read now. */
  const recent = (chain: ResolvedChain) =>
    Effect.gen(function* () {
      const known = readings.get(chain.id);
      if (known !== undefined && (yield* Clock.currentTimeMillis) - known.at < FRESH_MS) return known.balance;
      return yield* read(chain);
    });

  /** Fails with `balance_below_floor` (counted and logged) when the chain has a floor and the balance is under it. */
  const requireAboveFloor = (chain: ResolvedChain, purpose: string) =>
    Effect.gen(function* () {
      const floor = chain.gas?.min_balance_wei;
      if (floor === undefined) return;
      const balance = yield* recent(chain);
      // Unknown (the chain did not answer): the submission's own reads will say so.
      if (balance === undefined || balance >= BigInt(floor)) return;
      yield* recordMetric((m) => m.relayerFloorRefusals.inc({ chain_id: String(chain.id) }));
      yield* Effect.logWarning("relayer balance below its floor; transaction refused").pipe(
        Effect.annotateLogs({
          chain: chain.id,
          purpose,
          balance_wei: balance.toString(),
          min_balance_wei: floor,
        }),
      );
      return yield* new RelayerError({
        reason: "balance_below_floor",
        message: `the relayer's balance on chain ${chain.id} is below its floor`,
      });
    });

  return { read, recent, requireAboveFloor };
});

export class RelayerBalances extends Context.Service<RelayerBalances>()("RelayerBalances", { make }) {
  static readonly layer = Layer.effect(RelayerBalances, make);
}
