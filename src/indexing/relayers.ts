/**
 * Thin handler for an operator's relayers (`RelayerSet`): decode, let the pure ledger apply it, keep
 * the operator's latest word on the relayer.
 */
import { ponder } from "ponder:registry";
import { relayer } from "ponder:schema";
import { Result } from "effect";
import { applyLog } from "../ledger/ledger.ts";
import { emptyLedger, relayerKey } from "../ledger/types.ts";
import { decodeOrStop } from "./log-position.ts";

type Hex = `0x${string}`;

ponder.on("MandateEscrow:RelayerSet", async ({ event, context }) => {
  const chainId = context.chain.id;
  const log = decodeOrStop("RelayerSet", event, chainId);
  if (log.kind !== "RelayerSet") throw new Error(`RelayerSet decoded as ${log.kind}`);
  const applied = applyLog(emptyLedger, log);
  if (Result.isFailure(applied)) throw applied.failure;
  const row = {
    chainId,
    operator: log.operator as Hex,
    relayer: log.relayer as Hex,
    allowed: applied.success.state.relayers.has(relayerKey(chainId, log.operator, log.relayer)),
    updatedAt: log.at,
  };
  await context.db.insert(relayer).values(row).onConflictDoUpdate(row);
});
