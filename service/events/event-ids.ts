import { createHash } from "node:crypto";
import { encodeId } from "../ids.ts";

/**
 * An event's id is a function of the fact it reports: `evt_` + the fact's chain time + a hash of the
 * fact's key. A replay, a reindex, a restart or a second relay process derives the same id, and the
 * outbox's unique fact key makes the insert happen once. Ids still sort by (chain) time, and events of
 * one object within the same second by `order` (its n-th event: a payment paid and reversed in one
 * block lists in that order).
 */
export const eventIdForFact = (factKey: string, timestampSeconds: number, order = 0): string =>
  encodeId(
    "evt",
    timestampSeconds * 1000 + Math.min(Math.max(order, 0), 999),
    createHash("sha256").update(factKey).digest(),
  );
