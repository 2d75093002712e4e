/** The money a relayed fact moves, as the merchant's ledger (balances/balance-store.ts) records it. */
import { Effect } from "effect";
import {
  BalanceStore,
  type LedgerFact,
  MONEY_FACT_KINDS,
  type MoneyFactKind,
} from "../balances/balance-store.ts";
import type { ResolvedChain } from "../chains/config.ts";
import type { FactRow } from "./fact-row.ts";

const isMoneyKind = (kind: FactRow["kind"]): kind is MoneyFactKind =>
  (MONEY_FACT_KINDS as ReadonlyArray<string>).includes(kind);

/** The fact's movement, or undefined for a fact that moves no money (a signature, a revocation). */
const ledgerFactOf = (fact: FactRow): LedgerFact | undefined => {
  const { kind } = fact;
  if (!isMoneyKind(kind) || fact.amount === null) return undefined;
  const payment = kind.startsWith("payment.");
  if (!payment && fact.charge_id === null) return undefined;
  return {
    key: fact.key,
    kind,
    blockNumber: fact.block_number,
    blockHash: fact.block_hash,
    txHash: fact.tx_hash,
    logIndex: fact.log_index,
    timestamp: Number(fact.timestamp),
    amount: fact.amount,
    token: fact.token,
    releaseAt: Number(fact.details.release_at ?? 0),
    chargeOnchainId: payment ? null : fact.charge_id,
    depositAddress: payment ? String(fact.details.deposit_address ?? "") : null,
  };
};

/**
 * Records the money moved by `applied`, facts of the chain each applied for its merchant, into each
 * merchant's ledger in the order given (chain order); facts that move no money are passed. Returns how
 * many movements were new.
 */
export const recordMovements = (
  chain: ResolvedChain,
  applied: ReadonlyArray<{ readonly fact: FactRow; readonly merchantId: string }>,
) =>
  Effect.gen(function* () {
    const ledger = yield* BalanceStore;
    const byMerchant = new Map<string, LedgerFact[]>();
    for (const { fact, merchantId } of applied) {
      const moved = ledgerFactOf(fact);
      if (moved === undefined) continue;
      const facts = byMerchant.get(merchantId) ?? [];
      facts.push(moved);
      byMerchant.set(merchantId, facts);
    }
    let recorded = 0;
    for (const [merchantId, facts] of byMerchant)
      recorded += yield* ledger.record({ merchantId, chain }, facts);
    return recorded;
  });
