/**
 * Thin handlers: decode the escrow's log, load the rows it touches, let the pure ledger decide, store
 * what it returns. A log the ledger refuses stops the indexer (the chain would contradict the contract).
 */
import { ponder } from "ponder:registry";
import { charge, fact, mandate, relayer } from "ponder:schema";
import { Result } from "effect";
import { applyLog } from "../ledger/ledger.ts";
import { chargeKey, type LedgerState, mandateKey, relayerKey } from "../ledger/types.ts";
import {
  type ChargeRow,
  chargeToRow,
  factToRow,
  type MandateRow,
  mandateToRow,
  rowToCharge,
  rowToMandate,
} from "./ledger-rows.ts";
import { decodeOrStop } from "./log-position.ts";

type Hex = `0x${string}`;

const EVENTS = [
  "MandateAuthorized",
  "MandateRevoked",
  "CapLowered",
  "Charged",
  "Released",
  "Returned",
] as const;

for (const name of EVENTS) {
  ponder.on(`MandateEscrow:${name}`, async ({ event, context }) => {
    const log = decodeOrStop(name, event, context.chain.id);
    if (!("mandateId" in log)) throw new Error(`${name} decoded as ${log.kind}`);
    const chainId = context.chain.id;

    // Only rows the ledger reads are loaded: a Charged log is checked against its mandate alone. Ponder
    // prefetches them for the whole block (live too, with patches/ponder+0.17.7.patch).
    const mandateRow = await context.db.find(mandate, { chainId, mandateId: log.mandateId as Hex });
    const chargeRow =
      "chargeId" in log && log.kind !== "Charged"
        ? await context.db.find(charge, { chainId, chargeId: log.chargeId as Hex })
        : null;
    // Who may have lowered a cap besides the operator and the payee: the relayer the log names, if named.
    const relayerRow =
      log.kind === "CapLowered" && mandateRow
        ? await context.db.find(relayer, { chainId, operator: mandateRow.operator, relayer: log.by as Hex })
        : null;
    const state: LedgerState = {
      payments: new Map(),
      relayers: new Set(
        relayerRow?.allowed ? [relayerKey(chainId, relayerRow.operator, relayerRow.relayer)] : [],
      ),
      mandates: new Map(
        mandateRow ? [[mandateKey(chainId, log.mandateId), rowToMandate(mandateRow as MandateRow)]] : [],
      ),
      charges: new Map(
        chargeRow && "chargeId" in log
          ? [[chargeKey(chainId, log.chargeId), rowToCharge(chargeRow as ChargeRow)]]
          : [],
      ),
    };

    const applied = applyLog(state, log);
    if (Result.isFailure(applied)) throw applied.failure;

    const nextMandate = applied.success.state.mandates.get(mandateKey(chainId, log.mandateId));
    if (nextMandate) {
      const row = mandateToRow(nextMandate);
      await context.db.insert(mandate).values(row).onConflictDoUpdate(row);
    }
    if ("chargeId" in log) {
      const nextCharge = applied.success.state.charges.get(chargeKey(chainId, log.chargeId));
      if (nextCharge) {
        const row = chargeToRow(nextCharge);
        // A new charge, and facts, are inserted without a read: the ledger allows one charge per id and
        // one fact per key, so a conflict would contradict the contract and fails the block's write.
        if (log.kind === "Charged") await context.db.insert(charge).values(row);
        else await context.db.insert(charge).values(row).onConflictDoUpdate(row);
      }
    }
    for (const f of applied.success.facts) await context.db.insert(fact).values(factToRow(f));
  });
}
