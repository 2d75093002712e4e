/** An escrow event as Ponder hands it over, decoded into a ledger log (or the indexer stops). */
import { Result } from "effect";
import { toEscrowLog } from "../ledger/decode.ts";
import type { EscrowLog } from "../ledger/types.ts";

interface PonderEvent {
  readonly args: unknown;
  readonly block: { readonly number: bigint; readonly hash: string; readonly timestamp: bigint };
  readonly transaction: { readonly hash: string };
  readonly log: { readonly logIndex: number };
}

export const decodeOrStop = (name: string, event: PonderEvent, chainId: number): EscrowLog => {
  const decoded = toEscrowLog(name, event.args as Record<string, unknown>, {
    chainId,
    blockNumber: Number(event.block.number),
    blockHash: event.block.hash,
    timestamp: Number(event.block.timestamp),
    txHash: event.transaction.hash,
    logIndex: event.log.logIndex,
  });
  if (Result.isFailure(decoded))
    throw new Error(`undecodable ${name} log in ${event.transaction.hash}: ${String(decoded.failure)}`);
  return decoded.success;
};
