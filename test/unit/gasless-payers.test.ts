/**
 * The pay page's rules per payer that are arithmetic (payments/gasless-payers.ts): what of a balance its
 * pending gasless transfers leave, and how much of a cooling-off is left in chain time.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { coolingOffLeft, unreserved } from "../../service/payments/gasless-payers.ts";

const units = fc.bigInt({ min: 0n, max: 2n ** 128n });

describe("the balance reserved by pending transfers", () => {
  it("leaves the balance less what is reserved, never below zero", () => {
    fc.assert(
      fc.property(units, units, (balance, reserved) => {
        const left = unreserved(balance, reserved);
        expect(left).toBeGreaterThanOrEqual(0n);
        expect(left).toBe(balance > reserved ? balance - reserved : 0n);
      }),
    );
  });

  it("refuses a second authorization of the whole balance while the first is pending", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 1n, max: 2n ** 128n }), (balance) => {
        expect(unreserved(balance, 0n) >= balance).toBe(true);
        expect(unreserved(balance, balance) >= balance).toBe(false);
      }),
    );
  });
});

describe("the cooling-off after a revert", () => {
  it("is the revert's time plus the cooling-off less now, while positive, and shrinks as chain time passes", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 40 }),
        fc.integer({ min: 0, max: 30 * 86_400 }),
        fc.integer({ min: 0, max: 2 ** 40 }),
        fc.integer({ min: 0, max: 86_400 }),
        (revertedAt, cooling, now, later) => {
          const left = coolingOffLeft(revertedAt, cooling, now);
          expect(left).toBe(Math.max(0, revertedAt + cooling - now));
          expect(left === 0).toBe(now >= revertedAt + cooling);
          expect(coolingOffLeft(revertedAt, cooling, now + later)).toBeLessThanOrEqual(left);
        },
      ),
    );
  });

  it("is none without a revert", () => {
    expect(coolingOffLeft(undefined, 3600, 0)).toBe(0);
  });
});
