/** Examples of the reconciliation export. */
import type { ReconciliationEntry } from "../../reconciliation/reconciliation.ts";
import { at, CHAIN, CHARGE_BLOCK, CUSTOMER_ADDRESS, HASHES, PAYOUT_ADDRESS, USDC } from "./shared.ts";

export const reconciliationEntry: ReconciliationEntry = {
  type: "charge",
  chain: CHAIN.id,
  block_number: CHARGE_BLOCK,
  block_hash: HASHES.chargeBlock,
  timestamp: at(3606),
  transaction_hash: HASHES.chargeTransaction,
  log_index: 3,
  mandate: HASHES.mandateOnchainId,
  charge_id: HASHES.chargeOnchainId,
  period: 0,
  payment_id: null,
  deposit_address: null,
  token: USDC.symbol,
  token_address: USDC.address,
  amount: "19990000",
  amount_decimal: "19.99",
  customer_address: CUSTOMER_ADDRESS,
  payee_address: PAYOUT_ADDRESS,
  confirmations: 12,
  livemode: false,
  cursor: `${CHAIN.id}:${CHARGE_BLOCK}:3`,
};
