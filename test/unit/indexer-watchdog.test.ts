import { Duration } from "effect";
import { describe, expect, it } from "vitest";
import {
  type ChainObservation,
  type ChainWatchEntry,
  describeStalled,
  observeChain,
  watchdogInterval,
} from "../../service/chains/indexer-watchdog.ts";

const STALL_MS = 60_000;
const block = (number: number) => ({ number: BigInt(number), timestamp: 1_700_000_000 + number * 2 });
const seen = (
  head: number | undefined,
  indexed: number | undefined,
  indexer: ChainObservation["indexer"] = "live",
) => ({
  head: head === undefined ? undefined : block(head),
  indexed: indexed === undefined ? undefined : block(indexed),
  indexer,
  relayerBalance: undefined,
});

/** Feeds observations one per `stepMs`, returning every entry. */
const run = (observations: ReadonlyArray<ChainObservation>, stepMs = 10_000) => {
  let previous: ChainWatchEntry | undefined;
  return observations.map((observation, i) => {
    previous = observeChain(31337, previous, observation, i * stepMs, STALL_MS);
    return previous;
  });
};

describe("indexer watchdog", () => {
  it("flags a chain whose head moves on while its indexed head stays put for the stall time", () => {
    const entries = run([
      seen(10, 10),
      seen(11, 10),
      seen(12, 10),
      seen(14, 10),
      seen(15, 10),
      seen(16, 10),
      seen(17, 10),
      seen(18, 10),
    ]);
    expect(entries.map((e) => e.stalled)).toEqual([false, false, false, false, false, false, false, true]);
    expect(entries[7]?.behindSince).toBe(10_000);
  });

  it("never flags an indexer that is behind but moving, nor one level with a quiet chain", () => {
    const moving = run(Array.from({ length: 20 }, (_, i) => seen(100 + 2 * i, 99 + 2 * i)));
    expect(moving.some((e) => e.stalled)).toBe(false);
    const quiet = run(Array.from({ length: 20 }, () => seen(50, 50)));
    expect(quiet.some((e) => e.stalled)).toBe(false);
  });

  it("does not count while the indexer backfills (its head row moves only once it is live)", () => {
    const entries = run(Array.from({ length: 10 }, (_, i) => seen(100 + i, 10, "backfilling")));
    expect(entries.some((e) => e.stalled || e.behindSince !== undefined)).toBe(false);
  });

  it("keeps the last head when the RPC misses a check, but claims a stall only on checks it answered", () => {
    const frozenRpc = run([
      seen(10, 10),
      seen(20, 10),
      ...Array.from({ length: 8 }, () => seen(undefined, 10)),
      seen(21, 10),
    ]);
    expect(frozenRpc[2]?.head?.number).toBe(20n);
    expect(frozenRpc.some((e) => e.stalled)).toBe(false);
    expect(frozenRpc[10]?.behindSince).toBe(100_000);
    // A stall clears once the indexer moves.
    const entries = run([
      seen(10, 10),
      ...Array.from({ length: 7 }, (_, i) => seen(11 + i, 10)),
      seen(21, 21),
    ]);
    expect(entries[7]?.stalled).toBe(true);
    expect(entries[8]?.stalled).toBe(false);
    expect(entries[8]?.behindSince).toBeUndefined();
  });

  it("checks a few times per stall period and names stalled chains", () => {
    expect(Duration.toMillis(watchdogInterval(60))).toBe(5_000);
    expect(Duration.toMillis(watchdogInterval(8))).toBe(2_000);
    expect(Duration.toMillis(watchdogInterval(2))).toBe(1_000);
    expect(describeStalled([31337])).toBe("stalled: chain 31337");
    expect(describeStalled([1, 10])).toBe("stalled: chain 1, chain 10");
  });
});
