/** Differential test: the contract's period math and the service's TypeScript twin agree. */
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { periodIndexAt, periodStart } from "../../src/ledger/period.ts";
import { type Chain, startChain } from "./harness.ts";

const RUNS = Number(process.env.PERIOD_RUNS ?? 400);
const utc = (y: number, m: number, d: number, s = 0) => Date.UTC(y, m - 1, d) / 1000 + s;

let chain: Chain;
beforeAll(async () => {
  chain = await startChain();
});
afterAll(async () => {
  await chain?.stop();
});

/** Anchors that stress the calendar: month ends (28-31), Feb 29 of leap years, Dec 31, and any time. */
const anchor = fc.oneof(
  fc.integer({ min: 0, max: utc(2500, 1, 1) }),
  fc
    .record({
      year: fc.integer({ min: 1970, max: 2400 }),
      month: fc.integer({ min: 1, max: 12 }),
      day: fc.integer({ min: 28, max: 31 }),
      second: fc.integer({ min: 0, max: 86_399 }),
    })
    .map(({ year, month, day, second }) => {
      const last = new Date(Date.UTC(year, month, 0)).getUTCDate();
      return utc(year, month, Math.min(day, last), second);
    }),
  fc.integer({ min: 1972, max: 2396 }).map((y) => utc(y - (y % 4), 2, 29, 12 * 3600)),
  fc.integer({ min: 1970, max: 2400 }).map((y) => utc(y, 12, 31, 86_399)),
);
const offset = fc.oneof(
  fc.integer({ min: 0, max: 40 * 86_400 }),
  fc.integer({ min: 0, max: 100 * 366 * 86_400 }),
  fc.integer({ min: 0, max: 7000 * 366 * 86_400 }),
);

describe("period functions: contract vs TypeScript", () => {
  it("agree on the period index and its start, on random anchors and times", async () => {
    let checked = 0;
    await fc.assert(
      fc.asyncProperty(anchor, offset, async (a, off) => {
        const t = a + off;
        const onChain = await chain.read<bigint>(chain.escrow, MandateEscrowAbi, "periodIndexAt", [
          BigInt(a),
          BigInt(t),
        ]);
        const k = periodIndexAt(a, t);
        expect(Number(onChain)).toBe(k);
        const start = await chain.read<bigint>(chain.escrow, MandateEscrowAbi, "periodStart", [
          BigInt(a),
          onChain + 1n,
        ]);
        expect(Number(start)).toBe(periodStart(a, Number(onChain) + 1));
        checked += 1;
      }),
      { numRuns: RUNS },
    );
    expect(checked).toBeGreaterThanOrEqual(RUNS);
  });
});
