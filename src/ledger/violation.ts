/** What applying a log yields, and the ledger's refusal of a log that breaks the escrow's rules. */
import { Result, Schema } from "effect";
import type { Fact, LedgerState, LogPosition } from "./types.ts";

export class LedgerViolation extends Schema.TaggedError<LedgerViolation>()("LedgerViolation", {
  message: Schema.String,
  txHash: Schema.String,
  logIndex: Schema.Number,
}) {}

export interface Applied {
  readonly state: LedgerState;
  readonly facts: readonly Fact[];
}

export const violation = (at: LogPosition, message: string) =>
  Result.fail(new LedgerViolation({ message, txHash: at.txHash, logIndex: at.logIndex }));
