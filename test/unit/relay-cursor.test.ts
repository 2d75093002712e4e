import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  advanceAnchors,
  type FactPosition,
  MAX_ANCHORS,
  rewindAnchors,
  thinAnchors,
} from "../../service/facts/relay-cursor.ts";

const at = (block: number, logIndex = 0): FactPosition => ({
  block: String(block),
  log_index: logIndex,
  key: `31337:charge.succeeded:${block}:${logIndex}`,
  hash: `0xhash${block}`,
});

/** The anchors after reading facts in the given blocks (ascending), one batch per block. */
const readThrough = (blocks: readonly number[]) =>
  blocks.reduce<FactPosition[]>((anchors, block) => advanceAnchors(anchors, at(block)), []);

describe("fact relay cursor anchors", () => {
  it("keep one anchor per block, the last position read in it, the cursor last", () => {
    const anchors = advanceAnchors(advanceAnchors(readThrough([1, 2]), at(3, 0)), at(3, 7));
    expect(anchors.map((a) => [a.block, a.log_index])).toEqual([
      ["1", 0],
      ["2", 0],
      ["3", 7],
    ]);
  });

  it("stay few however long the chain, in order, every recent block kept", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 1, maxLength: 3000 }), (steps) => {
        let block = 0;
        const blocks = steps.map((step) => {
          block += step;
          return block;
        });
        const anchors = readThrough(blocks);
        expect(anchors.length).toBeLessThanOrEqual(MAX_ANCHORS);
        expect(anchors.at(-1)?.block).toBe(String(blocks.at(-1)));
        const numbers = anchors.map((a) => Number(a.block));
        expect([...numbers].sort((a, b) => a - b)).toEqual(numbers);
        expect(new Set(numbers).size).toBe(numbers.length);
        // Every block read within 8 blocks of the cursor is kept.
        const head = blocks.at(-1) as number;
        expect(numbers.filter((b) => head - b < 8)).toEqual(blocks.filter((b) => head - b < 8));
      }),
    );
  });

  it("cover deep reorgs: with 10,000 blocks read, an anchor sits below any depth up to thousands", () => {
    const blocks = Array.from({ length: 10_000 }, (_, i) => i + 1);
    const anchors = readThrough(blocks);
    for (const depth of [1, 5, 20, 100, 1000, 5000]) {
      const fork = 10_000 - depth;
      const below = anchors.filter((a) => Number(a.block) < fork);
      expect(below.length).toBeGreaterThan(0);
      // Rewinding costs at most about as much again as the reorg's depth.
      expect(fork - Number(below.at(-1)?.block)).toBeLessThanOrEqual(depth + 8);
    }
  });

  it("rewind to the newest anchor whose fact still has its block hash, or to the start", () => {
    const anchors = readThrough([10, 20, 30, 40]);
    const current = new Map(anchors.map((a) => [a.key, a.hash] as const));
    expect(rewindAnchors(anchors, current)).toEqual(anchors);
    current.delete(at(40).key);
    current.set(at(30).key, "0xother");
    expect(rewindAnchors(anchors, current).map((a) => a.block)).toEqual(["10", "20"]);
    expect(rewindAnchors(anchors, new Map())).toEqual([]);
  });

  it("thinning an already thin list changes nothing", () => {
    const anchors = readThrough(Array.from({ length: 500 }, (_, i) => 3 * i + 1));
    expect(thinAnchors(anchors)).toEqual(anchors);
  });
});
