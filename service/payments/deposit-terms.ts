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

/** Each return attempt is its own transaction; the action lets at most one be pending or mined. */
export const paymentReturnAction = (chainId: number, paymentId: string) =>
  `payment-return:${chainId}:${paymentId}`;
