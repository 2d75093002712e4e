import { createHash } from "node:crypto";
import { encodeId } from "../ids.ts";

/**
 * An event's id is a function of the fact it reports: `evt_` + the fact's chain time + a hash of the
 * fact's key. A replay, a reindex, a restart or a second relay process derives the same id, and the
 * outbox's unique fact key makes the insert happen once. Ids still sort by (chain) time.
 */
export const eventIdForFact = (factKey: string, timestampSeconds: number): string =>
  encodeId("evt", timestampSeconds * 1000, createHash("sha256").update(factKey).digest());
