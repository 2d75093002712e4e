import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  AT_RISK_LEAD_SECONDS,
  atRiskCheckAt,
  atRiskReasons,
  DISCOUNT_ENDING_LEAD_SECONDS,
  discountWarningAt,
} from "../../service/subscriptions/warnings.ts";

const units = fc.bigInt({ min: 0n, max: 10n ** 12n });

describe("advance warnings", () => {
  it("names exactly the reasons the charge would fail for", () => {
    fc.assert(
      fc.property(units, units, units, units, units, (amount, cap, approvalLeft, balance, allowance) => {
        const reasons = atRiskReasons({ amount, cap, approvalLeft, balance, allowance });
        if (amount === 0n) {
          expect(reasons).toEqual([]);
          return;
        }
        expect(reasons.includes("mandate_cap_exceeded")).toBe(amount > cap);
        expect(reasons.includes("approval_exhausted")).toBe(approvalLeft < amount);
        expect(reasons.includes("insufficient_funds")).toBe(
          balance < amount || (allowance < amount && approvalLeft >= amount),
        );
        expect(new Set(reasons).size).toBe(reasons.length);
      }),
    );
  });

  it("falls due a fixed lead before the charge", () => {
    expect(atRiskCheckAt(1_000_000)).toBe(1_000_000 - 3 * 86_400);
    expect(AT_RISK_LEAD_SECONDS).toBe(259_200);
    expect(discountWarningAt(2_000_000)).toBe(2_000_000 - 7 * 86_400);
    expect(DISCOUNT_ENDING_LEAD_SECONDS).toBe(604_800);
  });

  it("a charge that fits raises nothing", () => {
    expect(atRiskReasons({ amount: 5n, cap: 5n, approvalLeft: 5n, balance: 5n, allowance: 5n })).toEqual([]);
    expect(atRiskReasons({ amount: 6n, cap: 5n, approvalLeft: 0n, balance: 0n, allowance: 9n })).toEqual([
      "mandate_cap_exceeded",
      "approval_exhausted",
      "insufficient_funds",
    ]);
  });
});
