/** A payment record's deposit terms as the escrow takes them, and the names of its relayer actions. */
import type { Hex } from "viem";
import type { DepositTerms } from "./deposit-address.ts";
import type { PaymentRow } from "./payment-object.ts";

export const depositTermsOf = (row: PaymentRow): DepositTerms => ({
  paymentId: row.onchain_id as Hex,
  payee: row.payee_address as Hex,
  token: row.token_address as Hex,
  operator: row.operator_address as Hex,
  holdSeconds: BigInt(row.hold_seconds),
});

/**
 * The return of one hold of a payment: each attempt is its own transaction, and the action lets at most
 * one be pending or mined. A payment can be held again after a return (funds arriving later), so the
 * action names the hold by how many returns the payment had before it: were it the payment's alone, the
 * first return, mined, would answer every later one and none would be sent.
 */
export const paymentReturnAction = (chainId: number, paymentId: string, returnsBefore: number) =>
  `payment-return:${chainId}:${paymentId}:${returnsBefore}`;
