/** Examples of the test-mode helper routes (local chains only). */
import type { AdvanceClockRequest, FundRequest, TestClock, TestFunding } from "../../testing/test-helpers.ts";
import type { PayRequest, TestPaymentTransfer } from "../../testing/test-payments.ts";
import { at, CHAIN, CUSTOMER_ADDRESS, DEPOSIT_ADDRESS, HASHES, IDS } from "./shared.ts";

export const fundRequest: typeof FundRequest.Type = { amount_decimal: "100" };

export const testFunding: typeof TestFunding.Type = {
  object: "test_funding",
  mandate: IDS.mandate,
  customer_address: CUSTOMER_ADDRESS,
  amount: "100000000",
  amount_decimal: "100",
  balance_decimal: "100",
  transaction_hash: HASHES.fundTransaction,
};

export const advanceClock: typeof AdvanceClockRequest.Type = { seconds: 2_678_400, chain: CHAIN.id };

export const testClock: typeof TestClock.Type = {
  object: "test_clock",
  chain: CHAIN.id,
  advanced_by: 2_678_400,
  now: at(9300) + 2_678_400,
};

export const payRequest: PayRequest = { amount_decimal: "49.90" };

export const testPaymentTransfer: TestPaymentTransfer = {
  object: "test_payment_transfer",
  payment: IDS.payment,
  from: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
  to: DEPOSIT_ADDRESS,
  amount: "49900000",
  amount_decimal: "49.9",
  transaction_hash: HASHES.testPayTransaction,
  block_number: 1790,
};
