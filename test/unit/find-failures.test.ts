/**
 * The charge engine's bisection with fake simulations: each item's outcome is the one a simulation of
 * it alone would give, a batch that succeeds costs one simulation, and failures cost O(k log n).
 */
import { Effect } from "effect";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { findFailures } from "../../service/chains/find-failures.ts";

const run = (size: number, failing: ReadonlySet<number>) => {
  let wholes = 0;
  let ones = 0;
  const items = Array.from({ length: size }, (_, i) => i);
  const outcomes = Effect.runSync(
    findFailures(
      items,
      (batch) =>
        Effect.sync(() => {
          wholes++;
          return batch.every((i) => !failing.has(i));
        }),
      (item) =>
        Effect.sync(() => {
          ones++;
          return failing.has(item) ? `fails:${item}` : undefined;
        }),
    ),
  );
  return { outcomes, simulations: wholes + ones };
};

describe("findFailures", () => {
  it("finds exactly the failing items, in order, for any batch (property)", () => {
    fc.assert(
      fc.property(
        fc
          .integer({ min: 0, max: 300 })
          .chain((size) =>
            fc.tuple(fc.constant(size), fc.uniqueArray(fc.nat(Math.max(0, size - 1)), { maxLength: size })),
          ),
        ([size, failing]) => {
          const set = new Set(failing.filter((i) => i < size));
          const { outcomes, simulations } = run(size, set);
          expect(outcomes).toEqual(
            Array.from({ length: size }, (_, i) => (set.has(i) ? `fails:${i}` : undefined)),
          );
          if (size > 1 && set.size === 0) expect(simulations).toBe(1);
          // Each failure costs at most two simulations per level of halving.
          if (size > 1)
            expect(simulations).toBeLessThanOrEqual(1 + 2 * set.size * Math.ceil(Math.log2(size)) + 1);
        },
      ),
      { numRuns: 300 },
    );
  });

  it("simulates a single item alone, and nothing for none", () => {
    expect(run(1, new Set([0]))).toEqual({ outcomes: ["fails:0"], simulations: 1 });
    expect(run(0, new Set())).toEqual({ outcomes: [], simulations: 0 });
  });

  it("stops at the first simulation error (a chain outage fails the batch)", () => {
    const outage = findFailures(
      [1, 2, 3],
      () => Effect.fail("rpc down" as const),
      () => Effect.succeed(undefined),
    );
    expect(Effect.runSync(Effect.flip(outage))).toBe("rpc down");
  });
});
