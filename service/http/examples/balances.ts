/** Examples of the ledger: the charge of the story, 10 USDC into a 7-day hold, and the balance after it. */
import type { BalanceObject, BalanceTransactionObject } from "../../balances/balance-transaction-object.ts";
import type { PeriodReportObject } from "../../reports/period-report-object.ts";
import { at, CHAIN, CHARGE_BLOCK, HASHES, HOLD_SECONDS, IDS, USDC } from "./shared.ts";

export const chargeBalanceTransaction: BalanceTransactionObject = {
  id: IDS.chargeBalanceTransaction,
  object: "balance_transaction",
  livemode: false,
  type: "charge",
  amount: "10000000",
  amount_decimal: "10",
  balance_effect: "pending",
  entries: [
    { account: "customer", amount: "-10000000" },
    { account: "pending", amount: "10000000" },
  ],
  reverses: null,
  source: IDS.charge,
  invoice: null,
  chain: CHAIN.id,
  currency: USDC.symbol,
  token_address: USDC.address.toLowerCase(),
  gas: { amount_wei: "43251667000000", currency: "ETH" },
  block: { number: CHARGE_BLOCK, hash: HASHES.chargeBlock },
  transaction_hash: HASHES.chargeTransaction,
  log_index: 3,
  created: at(3606),
  available_on: at(3606) + HOLD_SECONDS,
};

export const balance: BalanceObject = {
  object: "balance",
  livemode: false,
  amounts: [
    {
      chain: CHAIN.id,
      currency: USDC.symbol,
      token_address: USDC.address.toLowerCase(),
      pending: "10000000",
      pending_decimal: "10",
      available: "25000000",
      available_decimal: "25",
      returned: "0",
      returned_decimal: "0",
    },
  ],
};

/** November in Berlin: the story's charge held, a release and an unheld payment. */
export const periodReport: PeriodReportObject = {
  object: "period_report",
  livemode: false,
  month: "2026-11",
  time_zone: "Europe/Berlin",
  period_start: 1_793_487_600,
  period_end: 1_796_079_600,
  balances: [
    {
      chain: CHAIN.id,
      currency: USDC.symbol,
      token_address: USDC.address.toLowerCase(),
      opening_pending: "10000000",
      charges_held: "10000000",
      payments_held: "0",
      released: "10000000",
      returned: "0",
      closing_pending: "10000000",
      charges_unheld: "0",
      payments_unheld: "25000000",
      available_in: "35000000",
      gas_wei: "86503334000000",
      gas_currency: "ETH",
      first_block: 1843,
      last_block: 2410,
    },
  ],
  invoices: [
    {
      chain: CHAIN.id,
      token_address: USDC.address.toLowerCase(),
      paid: { count: 1, total: "10000000" },
      open: { count: 0, total: "0" },
      void: { count: 0, total: "0" },
      uncollectible: { count: 0, total: "0" },
      returned: { count: 0, amount: "0" },
    },
  ],
};
