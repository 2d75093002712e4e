/**
 * The pure rules behind a token issuer's blacklist and pause: which reverts they are, how long a refused
 * transfer is held back, what a charge's failure code becomes, how `/ready` names a paused token, and
 * which failures leave a subscription standing.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { nextAttemptAt, tokenRefusal } from "../../service/chains/blocked-transfers.ts";
import { describePaused, type TokenStatus } from "../../service/chains/token-states.ts";
import { classifyChargeRevert } from "../../service/charges/charge-failures.ts";
import { keepsSubscription } from "../../service/subscriptions/billing/collection.ts";

const MINUTE = 60_000;

describe("a token's refusal", () => {
  it("is Circle's pause or blacklist only for USDC's own reasons", () => {
    expect(tokenRefusal({ errorName: "Error", reason: "Pausable: paused" })).toBe("paused");
    expect(tokenRefusal({ errorName: "Error", reason: "Blacklistable: account is blacklisted" })).toBe(
      "blacklisted",
    );
    expect(tokenRefusal({ errorName: "Error", reason: "ERC20: transfer amount exceeds balance" })).toBe(
      undefined,
    );
    expect(tokenRefusal({ errorName: "InsufficientBalance" })).toBe(undefined);
    expect(tokenRefusal({ errorName: "NoHold", reason: "Pausable: paused" })).toBe(undefined);
    expect(tokenRefusal(undefined)).toBe(undefined);
  });
});

describe("holding a refused transfer back", () => {
  it("waits as long again as it has been held back, 1 to 15 minutes", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 40 }),
        fc.integer({ min: 0, max: 2 ** 32 }),
        (since, held) => {
          const now = since + held;
          const wait = nextAttemptAt(since, now) - now;
          expect(wait).toBeGreaterThanOrEqual(MINUTE);
          expect(wait).toBeLessThanOrEqual(15 * MINUTE);
          expect(wait).toBe(Math.min(Math.max(held, MINUTE), 15 * MINUTE));
        },
      ),
    );
  });

  it("doubles from a minute to the bound when every attempt is refused on time", () => {
    const since = 1_000_000;
    const waits: number[] = [];
    let now = since;
    for (let i = 0; i < 6; i++) {
      const next = nextAttemptAt(since, now);
      waits.push((next - now) / MINUTE);
      now = next;
    }
    expect(waits).toEqual([1, 1, 2, 4, 8, 15]);
  });
});

describe("a charge refused by the token", () => {
  it("fails for whoever the token blacklisted, or for the pause, never as the customer's funds", () => {
    const reason = "Blacklistable: account is blacklisted";
    expect(classifyChargeRevert("Error", { reason, blacklisted: "customer" })).toMatchObject({
      kind: "fail",
      failureCode: "customer_blocked",
    });
    expect(classifyChargeRevert("Error", { reason, blacklisted: "payee" })).toMatchObject({
      kind: "fail",
      failureCode: "payout_address_blocked",
    });
    expect(classifyChargeRevert("Error", { reason: "Pausable: paused", paused: true })).toMatchObject({
      kind: "fail",
      failureCode: "token_paused",
    });
    // Neither address blacklisted (the escrow itself, say): the token's reason is kept.
    const other = classifyChargeRevert("Error", { reason });
    expect(other).toMatchObject({ kind: "fail", failureCode: "processing_error" });
    expect(other.message).toContain(reason);
  });

  it("leaves the subscription standing only for a blacklisted address", () => {
    expect(keepsSubscription("customer_blocked")).toBe(true);
    expect(keepsSubscription("payout_address_blocked")).toBe(true);
    for (const code of [
      "insufficient_funds",
      "approval_exhausted",
      "processing_error",
      "mandate_revoked",
      null,
    ])
      expect(keepsSubscription(code)).toBe(false);
  });
});

describe("/ready's tokens", () => {
  const status = (chainId: number, symbol: string, paused: boolean): TokenStatus => ({
    chainId,
    token: "0x0000000000000000000000000000000000000001",
    symbol,
    paused,
    pausedSince: paused ? 1 : undefined,
  });
  it("names each paused token with its chain", () => {
    expect(describePaused([status(1, "USDC", false)])).toBe("ready");
    expect(
      describePaused([status(1, "USDC", true), status(10, "USDC", false), status(10, "EURC", true)]),
    ).toBe("paused: USDC on chain 1, EURC on chain 10");
  });
});
