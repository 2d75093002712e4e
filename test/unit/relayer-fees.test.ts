/**
 * The relayer's gas bounds as pure rules: fees within the chain's ceiling (a transaction waits while
 * the base fee alone is above it), replacements bounded by the ceiling and their count, the balance's
 * thresholds, the chain config's `gas` block, and which node answers mean "method refused" (the gas
 * limit then comes from eth_estimateGas).
 */
import { Effect } from "effect";
import fc from "fast-check";
import { MethodNotFoundRpcError, RpcRequestError } from "viem";
import { describe, expect, it } from "vitest";
import { parseChainsFile, type ResolvedChain } from "../../service/chains/config.ts";
import { refusedMethod } from "../../service/chains/gas-measure.ts";
import { balanceLevel } from "../../service/chains/relayer-balance.ts";
import { boundedReplacement, capFees, feesForNew } from "../../service/chains/relayer-fees.ts";

const gwei = (n: number) => BigInt(Math.round(n * 1e9));
const asked = (base: number, tip: number) => ({
  baseFeePerGas: gwei(base),
  maxPriorityFeePerGas: gwei(tip),
  maxFeePerGas: gwei(base * 1.2 + tip),
});

describe("fees within the ceiling", () => {
  it("offers the chain's fees when no ceiling is set, and never waits", () => {
    expect(feesForNew(asked(10, 1), {})).toEqual({
      fees: { maxFeePerGas: gwei(13), maxPriorityFeePerGas: gwei(1) },
      waits: false,
    });
  });

  it("caps both fees; sends while the base fee fits under the cap, waits once it does not", () => {
    const ceiling = { maxFeePerGas: gwei(12), maxPriorityFeePerGas: gwei(0.5) };
    expect(feesForNew(asked(10, 1), ceiling)).toEqual({
      fees: { maxFeePerGas: gwei(12), maxPriorityFeePerGas: gwei(0.5) },
      waits: false,
    });
    expect(feesForNew(asked(12.5, 1), ceiling).waits).toBe(true);
  });

  it("never offers above the ceiling, nor a tip above the fee cap (property)", () => {
    const wei = fc.bigInt({ min: 0n, max: 10n ** 12n });
    fc.assert(
      fc.property(
        wei,
        wei,
        wei,
        fc.option(wei, { nil: undefined }),
        fc.option(wei, { nil: undefined }),
        (base, tip, cap, max, maxTip) => {
          const ceiling = { maxFeePerGas: max, maxPriorityFeePerGas: maxTip };
          const { fees, waits } = feesForNew(
            { baseFeePerGas: base, maxPriorityFeePerGas: tip, maxFeePerGas: cap },
            ceiling,
          );
          if (max !== undefined) expect(fees.maxFeePerGas).toBeLessThanOrEqual(max);
          if (maxTip !== undefined) expect(fees.maxPriorityFeePerGas).toBeLessThanOrEqual(maxTip);
          expect(fees.maxPriorityFeePerGas).toBeLessThanOrEqual(fees.maxFeePerGas);
          expect(waits).toBe(base > fees.maxFeePerGas);
          expect(capFees(fees, ceiling)).toEqual(fees);
        },
      ),
    );
  });
});

describe("bounded replacements", () => {
  const old = { maxFeePerGas: gwei(10), maxPriorityFeePerGas: gwei(1) };
  const bounds = { current: undefined, replacements: 0, maxReplacements: 10 };

  it("raises both fees by 12.5% while the ceiling leaves room", () => {
    expect(boundedReplacement({ ...bounds, old, ceiling: {} })).toEqual({
      kind: "replace",
      fees: { maxFeePerGas: gwei(11.25) + 1n, maxPriorityFeePerGas: gwei(1.125) + 1n },
    });
  });

  it("stops at the ceiling: capped fees still 10% up are sent, less is held", () => {
    const capped = boundedReplacement({ ...bounds, old, ceiling: { maxFeePerGas: gwei(11) } });
    expect(capped).toEqual({
      kind: "replace",
      fees: { maxFeePerGas: gwei(11), maxPriorityFeePerGas: gwei(1.125) + 1n },
    });
    expect(boundedReplacement({ ...bounds, old, ceiling: { maxFeePerGas: gwei(10.9) } })).toEqual({
      kind: "held",
      reason: "fee_ceiling",
    });
    expect(boundedReplacement({ ...bounds, old, ceiling: { maxPriorityFeePerGas: gwei(1.05) } })).toEqual({
      kind: "held",
      reason: "fee_ceiling",
    });
  });

  it("stops after max_replacements", () => {
    expect(boundedReplacement({ ...bounds, old, ceiling: {}, replacements: 10 })).toEqual({
      kind: "held",
      reason: "replacement_limit",
    });
    expect(boundedReplacement({ ...bounds, old, ceiling: {}, maxReplacements: 0 }).kind).toBe("held");
  });

  it("a chain of replacements never passes the ceiling nor the count (property)", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 1n, max: 10n ** 11n }),
        fc.bigInt({ min: 1n, max: 10n ** 12n }),
        fc.nat(20),
        (start, ceilingFee, limit) => {
          let fees = { maxFeePerGas: start, maxPriorityFeePerGas: start / 10n + 1n };
          let sent = 0;
          for (let i = 0; i < 50; i++) {
            const next = boundedReplacement({
              old: fees,
              current: undefined,
              ceiling: { maxFeePerGas: ceilingFee },
              replacements: sent,
              maxReplacements: limit,
            });
            if (next.kind === "held") break;
            expect(next.fees.maxFeePerGas).toBeLessThanOrEqual(ceilingFee);
            fees = next.fees;
            sent += 1;
          }
          expect(sent).toBeLessThanOrEqual(limit);
        },
      ),
    );
  });
});

const chainWith = (gas: ResolvedChain["gas"]) => ({ gas }) as ResolvedChain;

describe("balance thresholds", () => {
  it("alerts below low_balance_wei and stops below min_balance_wei", () => {
    const chain = chainWith({ low_balance_wei: "1000", min_balance_wei: "100" });
    expect(balanceLevel(chain, 1000n)).toBe("ok");
    expect(balanceLevel(chain, 999n)).toBe("low");
    expect(balanceLevel(chain, 99n)).toBe("below_floor");
    expect(balanceLevel(chainWith(undefined), 0n)).toBe("ok");
    expect(balanceLevel(chainWith({ min_balance_wei: "100" }), 50n)).toBe("below_floor");
  });
});

const live = {
  id: 8453,
  name: "Base",
  livemode: true,
  rpc: { http: ["https://rpc.example"] },
  native_currency: { name: "Ether", symbol: "ETH", decimals: 18 },
  escrow: { address: "0x1111111111111111111111111111111111111111", start_block: 100 },
  tokens: [{ symbol: "USDC", decimals: 6, address: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913" }],
  subscriptions_available: true,
  payments_available: true,
  escrow_available: true,
  hold_seconds: 0,
  confirmations: 3,
};
const parse = (gas: unknown) =>
  Effect.runPromise(
    Effect.result(parseChainsFile(JSON.stringify({ chains: [{ ...live, gas }] }), "chains.json")),
  );

describe("the chain config's gas block", () => {
  it("accepts every field", async () => {
    const outcome = await parse({
      max_fee_per_gas_wei: "50000000000",
      max_priority_fee_per_gas_wei: "2000000000",
      max_replacements: 5,
      gas_limit_from: "estimate_gas",
      low_balance_wei: "100000000000000000",
      min_balance_wei: "10000000000000000",
    });
    expect(outcome._tag).toBe("Success");
  });

  it.each([
    [{ max_fee_per_gas_wei: "1.5" }, "gas.max_fee_per_gas_wei"],
    [{ max_fee_per_gas_wei: "10", max_priority_fee_per_gas_wei: "11" }, "gas.max_priority_fee_per_gas_wei"],
    [{ low_balance_wei: "10", min_balance_wei: "11" }, "gas.min_balance_wei"],
    [{ max_replacements: 101 }, "gas.max_replacements"],
    [{ gas_limit_from: "guess" }, "gas.gas_limit_from"],
    [{ ceiling: "1" }, "gas.ceiling"],
  ])("names the bad field (%#)", async (gas, field) => {
    const outcome = await parse(gas);
    expect(outcome._tag).toBe("Failure");
    if (outcome._tag === "Failure") expect(outcome.failure.message).toContain(field);
  });
});

describe("a node that refuses eth_createAccessList", () => {
  it("is told from one that answered with a revert or failed otherwise", () => {
    const notFound = new MethodNotFoundRpcError(new Error("x"), { method: "eth_createAccessList" });
    expect(refusedMethod(notFound)).toBe(true);
    const unsupported = new RpcRequestError({
      body: {},
      url: "http://127.0.0.1",
      error: { code: -32000, message: "the method eth_createAccessList does not exist/is not available" },
    });
    expect(refusedMethod(unsupported)).toBe(true);
    const reverted = new RpcRequestError({
      body: {},
      url: "http://127.0.0.1",
      error: { code: 3, message: "execution reverted" },
    });
    expect(refusedMethod(reverted)).toBe(false);
    expect(refusedMethod(new Error("fetch failed"))).toBe(false);
  });
});
