import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { splitCost } from "../../service/chains/gas-shares.ts";

describe("a transaction's cost split over the objects it carried", () => {
  it("gives each object a share; the shares sum exactly to the total and differ by at most one wei, the larger first", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 2n ** 200n }),
        fc.integer({ min: 1, max: 500 }),
        (total, count) => {
          const shares = splitCost(total, count);
          expect(shares).toHaveLength(count);
          expect(shares.reduce((sum, share) => sum + share, 0n)).toBe(total);
          const base = total / BigInt(count);
          const larger = Number(total % BigInt(count));
          shares.forEach((share, i) => {
            expect(share).toBe(i < larger ? base + 1n : base);
          });
        },
      ),
    );
  });

  it("keeps the whole cost in one share when the transaction carried nothing known", () => {
    expect(splitCost(21_000n * 7n, 0)).toEqual([147_000n]);
  });

  it("splits a batch of three the documented way", () => {
    expect(splitCost(100n, 3)).toEqual([34n, 33n, 33n]);
    expect(splitCost(2n, 3)).toEqual([1n, 1n, 0n]);
  });
});
