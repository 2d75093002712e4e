import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { gasLimitForUsed } from "../../service/chains/gas-measure.ts";
import { RelayerError } from "../../service/chains/relayer-account.ts";
import { relayerBudgetExhausted, withinBudget } from "../../service/chains/relayer-budget.ts";
import { replacementFees } from "../../service/chains/relayer-fees.ts";
import {
  decideTracking,
  l1FeeOf,
  nonceGaps,
  type TrackingInput,
} from "../../service/chains/relayer-tracking.ts";
import { unavailable } from "../../service/chains/unavailable.ts";
import { RateLimited } from "../../service/errors.ts";
import { toErrorResponse } from "../../service/http/error-response.ts";

const base: TrackingInput = {
  nonce: 7,
  receipt: undefined,
  receiptsAnswered: true,
  minedNonce: 7,
  nodeHasTransaction: true,
  ageMs: 1_000,
  bumpAfterMs: 30_000,
  baseFeePerGas: 1_000_000_000n,
  maxFeePerGas: 2_000_000_000n,
};

describe("relayer tracking decisions", () => {
  it("records a receipt whatever else the chain says", () => {
    expect(decideTracking({ ...base, receipt: "success", minedNonce: 99 })).toEqual({
      kind: "record",
      status: "mined",
    });
    expect(decideTracking({ ...base, receipt: "reverted" })).toEqual({ kind: "record", status: "reverted" });
  });

  it("supersedes a transaction whose nonce the chain used without a receipt of ours", () => {
    expect(decideTracking({ ...base, minedNonce: 8 })).toEqual({ kind: "superseded" });
  });

  it("never supersedes on a receipt lookup the node did not answer", () => {
    // A timeout is not "no receipt": superseding a mined transaction fails its charges.
    expect(decideTracking({ ...base, minedNonce: 8, receiptsAnswered: false })).toEqual({ kind: "wait" });
  });

  it("does not re-send bytes the node already holds", () => {
    expect(decideTracking(base)).toEqual({ kind: "wait" });
    // Queued behind a lower nonce (e.g. a gap after lost blocks): neither re-sent nor bumped, ever.
    expect(decideTracking({ ...base, minedNonce: 3, ageMs: 3_600_000 })).toEqual({ kind: "wait" });
  });

  it("re-sends bytes the node lost, and replaces the next nonce once it is old", () => {
    expect(decideTracking({ ...base, nodeHasTransaction: false })).toEqual({ kind: "rebroadcast" });
    expect(decideTracking({ ...base, nodeHasTransaction: false, minedNonce: 5, ageMs: 60_000 })).toEqual({
      kind: "rebroadcast",
    });
    expect(decideTracking({ ...base, ageMs: 30_000 })).toEqual({ kind: "replace" });
  });

  it("keeps lost bytes the base fee outprices until it falls, then re-sends them", () => {
    const held = { ...base, nodeHasTransaction: false, baseFeePerGas: 3_000_000_000n };
    expect(decideTracking(held)).toEqual({ kind: "hold_for_fees" });
    expect(decideTracking({ ...held, baseFeePerGas: 2_000_000_000n })).toEqual({ kind: "rebroadcast" });
    // Unknown base fee: sent as before (the node says whether it takes them).
    expect(decideTracking({ ...held, baseFeePerGas: undefined })).toEqual({ kind: "rebroadcast" });
  });

  it("waits when the node does not answer", () => {
    expect(decideTracking({ ...base, minedNonce: undefined, nodeHasTransaction: undefined })).toEqual({
      kind: "wait",
    });
    expect(decideTracking({ ...base, nodeHasTransaction: undefined })).toEqual({ kind: "wait" });
  });

  it("re-sends or replaces only a transaction that can still be mined (property)", () => {
    fc.assert(
      fc.property(
        fc.record({
          nonce: fc.nat(50),
          receipt: fc.constantFrom(undefined, "success" as const, "reverted" as const),
          receiptsAnswered: fc.boolean(),
          minedNonce: fc.option(fc.nat(50), { nil: undefined }),
          nodeHasTransaction: fc.option(fc.boolean(), { nil: undefined }),
          ageMs: fc.nat(100_000),
          bumpAfterMs: fc.integer({ min: 1, max: 100_000 }),
          baseFeePerGas: fc.option(fc.bigInt({ min: 0n, max: 100n }), { nil: undefined }),
          maxFeePerGas: fc.bigInt({ min: 0n, max: 100n }),
        }),
        (input) => {
          const decision = decideTracking(input);
          if (decision.kind === "rebroadcast") {
            expect(input.nodeHasTransaction).toBe(false);
            expect(input.minedNonce).toBeLessThanOrEqual(input.nonce);
            // Never bytes the base fee outprices: a node refuses them, and they could not be mined.
            if (input.baseFeePerGas !== undefined)
              expect(input.baseFeePerGas).toBeLessThanOrEqual(input.maxFeePerGas);
          }
          if (decision.kind === "hold_for_fees")
            expect(input.baseFeePerGas).toBeGreaterThan(input.maxFeePerGas);
          if (decision.kind === "replace") expect(input.minedNonce).toBe(input.nonce);
          if (input.receipt === undefined) expect(decision.kind).not.toBe("record");
          if (decision.kind === "superseded") expect(input.receiptsAnswered).toBe(true);
        },
      ),
    );
  });
});

describe("L1 data fee", () => {
  it("reads an OP-stack receipt's l1Fee, raw or formatted, and nothing from another receipt", () => {
    expect(l1FeeOf({ status: "success", l1Fee: "0x2386f26fc10000" })).toBe(10n ** 16n);
    expect(l1FeeOf({ l1Fee: 42n })).toBe(42n);
    expect(l1FeeOf({ status: "success" })).toBeUndefined();
    expect(l1FeeOf({ l1Fee: "lots" })).toBeUndefined();
    expect(l1FeeOf(null)).toBeUndefined();
  });
});

describe("nonce gaps", () => {
  it("finds the nonces below our pending ones that nothing of ours fills", () => {
    // The chain lost the blocks with nonces 3 and 4; ours at 5 and 6 wait in the pool.
    expect(nonceGaps(3, [5, 6])).toEqual([3, 4]);
    expect(nonceGaps(3, [3, 5])).toEqual([4]);
  });

  it("finds none in normal operation", () => {
    expect(nonceGaps(5, [5, 6, 7])).toEqual([]);
    expect(nonceGaps(8, [5, 6, 7])).toEqual([]);
    expect(nonceGaps(4, [])).toEqual([]);
  });
});

describe("refusals in the error shape", () => {
  it("a spent relayer budget is a retryable 503", () => {
    const response = toErrorResponse(relayerBudgetExhausted);
    expect(response.status).toBe(503);
    expect(response.body.error).toMatchObject({
      type: "api_error",
      code: "relayer_budget_exhausted",
      param: null,
    });
  });

  it("a relayer below its balance floor is a retryable 503 of its own", () => {
    const response = toErrorResponse(
      unavailable(new RelayerError({ reason: "balance_below_floor", message: "below" })),
    );
    expect(response.status).toBe(503);
    expect(response.body.error).toMatchObject({
      type: "api_error",
      code: "relayer_balance_low",
      param: null,
    });
    // A chain that did not answer stays what it was.
    const other = toErrorResponse(unavailable(new RelayerError({ reason: "rpc_failed", message: "down" })));
    expect(other.body.error.code).toBe("chain_unavailable");
  });

  it("a rate limit is a 429 with Retry-After", () => {
    const response = toErrorResponse(
      new RateLimited({ code: "rate_limited", message: "Too many requests.", retryAfterSeconds: 17 }),
    );
    expect(response.status).toBe(429);
    expect(response.headers).toEqual({ "Retry-After": "17" });
    expect(response.body.error.code).toBe("rate_limited");
  });
});

describe("relayer nonces, gas and fees", () => {
  it("gives a replacement at least 12.5% more on both fees, never below the chain's price, the cap never below the tip", () => {
    const gwei = fc.bigInt({ min: 1n, max: 10n ** 15n });
    fc.assert(
      fc.property(gwei, gwei, fc.option(fc.tuple(gwei, gwei), { nil: undefined }), (fee, tip, current) => {
        const old = { maxFeePerGas: fee, maxPriorityFeePerGas: tip };
        const next = replacementFees(
          old,
          current && { maxFeePerGas: current[0], maxPriorityFeePerGas: current[1] },
        );
        expect(next.maxPriorityFeePerGas * 1000n).toBeGreaterThan(tip * 1125n - 1000n);
        expect(next.maxFeePerGas * 1000n).toBeGreaterThan(fee * 1125n - 1000n);
        expect(next.maxFeePerGas).toBeGreaterThanOrEqual(next.maxPriorityFeePerGas);
        if (current) expect(next.maxFeePerGas).toBeGreaterThanOrEqual(current[0]);
      }),
    );
  });

  it("allows a transaction only while what it may cost fits what is left of the hour's budget", () => {
    expect(withinBudget(60n, 40n, 100n)).toBe(true);
    expect(withinBudget(61n, 40n, 100n)).toBe(false);
    expect(gasLimitForUsed(100_000n)).toBe(150_000n);
  });
});
