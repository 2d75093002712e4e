/**
 * The fact relay's per-chain cursor: the position (block, log index, key) of the last fact it read, so
 * a pass reads only the facts after it, and the counter of facts it declined. The cursor also keeps a
 * few earlier positions with their block hashes (anchors). A reorg replaces a suffix of the chain, so
 * while the block of a position still holds that fact under the same hash, nothing at or before the
 * position has changed; when the cursor's own block was replaced, the relay rewinds to the newest
 * anchor whose block is still there (or to the start) and reads forward again. Pure; the cursor is
 * stored by relay-store.ts.
 */
import { Schema } from "effect";

export const FactPosition = Schema.Struct({
  block: Schema.String,
  log_index: Schema.Number,
  key: Schema.String,
  hash: Schema.String,
});
export type FactPosition = typeof FactPosition.Type;

/** Anchors kept per level: one per block below 2 × this distance, then per 2, 4, 8… blocks. */
const PER_LEVEL = 4n;
export const MAX_ANCHORS = 64;

/** Anchors `distance` blocks under the cursor are kept one per aligned bucket of this many blocks. */
const bucketSize = (distance: bigint) => {
  let size = 1n;
  while (distance >= size * 2n * PER_LEVEL) size *= 2n;
  return size;
};

/**
 * Keeps the newest anchor of each bucket, buckets growing with the distance under the cursor, so a
 * short list covers reorgs of any depth and a rewind goes back at most about as far again as the
 * reorg reached. Buckets are aligned to block numbers, so thinning again keeps the same anchors.
 */
export const thinAnchors = (anchors: ReadonlyArray<FactPosition>): FactPosition[] => {
  const newest = anchors[anchors.length - 1];
  if (newest === undefined) return [];
  const head = BigInt(newest.block);
  const buckets = new Set<string>();
  const kept: FactPosition[] = [];
  for (let i = anchors.length - 1; i >= 0 && kept.length < MAX_ANCHORS; i--) {
    const anchor = anchors[i] as FactPosition;
    const block = BigInt(anchor.block);
    const size = bucketSize(head - block);
    const bucket = `${size}:${block / size}`;
    if (buckets.has(bucket)) continue;
    buckets.add(bucket);
    kept.push(anchor);
  }
  return kept.reverse();
};

/** The anchors after reading up to `position` (one per block: the last position read in it). */
export const advanceAnchors = (
  anchors: ReadonlyArray<FactPosition>,
  position: FactPosition,
): FactPosition[] => {
  const last = anchors[anchors.length - 1];
  const rest = last !== undefined && last.block === position.block ? anchors.slice(0, -1) : anchors;
  return thinAnchors([...rest, position]);
};

/** The anchors up to the newest one whose fact still has its block hash; [] means from the start. */
export const rewindAnchors = (
  anchors: ReadonlyArray<FactPosition>,
  current: ReadonlyMap<string, string>,
): FactPosition[] => {
  for (let i = anchors.length - 1; i >= 0; i--) {
    const anchor = anchors[i] as FactPosition;
    if (current.get(anchor.key) === anchor.hash) return anchors.slice(0, i + 1);
  }
  return [];
};
