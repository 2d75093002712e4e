/** Examples of the payment routes. */
import type { PaymentObject } from "../../payments/payment-object.ts";
import type { CreatePayment, ReturnPayment } from "../../payments/payments.ts";
import {
  at,
  CHAIN,
  CUSTOMER_ADDRESS,
  DEPOSIT_ADDRESS,
  HASHES,
  HOLD_SECONDS,
  IDS,
  PUBLIC_URL,
  TRANSFER_BLOCK,
  USDC,
} from "./shared.ts";

export const createPayment: CreatePayment = {
  amount_decimal: "49.90",
  chain: CHAIN.id,
  token: "USDC",
  reference: "order-1043",
  description: "Annual plan, 1 seat",
  expires_in: 3600,
};

/** As POST /v1/payments answers: waiting for a transfer to `address`. */
export const newPayment: PaymentObject = {
  id: IDS.payment,
  object: "payment",
  livemode: false,
  status: "requires_payment",
  amount: "49900000",
  amount_decimal: "49.9",
  amount_received: "0",
  amount_received_decimal: "0",
  amount_remaining: "49900000",
  amount_remaining_decimal: "49.9",
  amount_pending_decimal: "0",
  token: USDC.symbol,
  token_address: USDC.address,
  chain: CHAIN.id,
  address: DEPOSIT_ADDRESS,
  payment_url: `${PUBLIC_URL}/pay/Qd7rT2mXk9LpW4zNb8VcYh3J`,
  reference: "order-1043",
  description: "Annual plan, 1 seat",
  expires_at: at(3720),
  created: at(120),
  paid_at: null,
  canceled_at: null,
  held: false,
  amount_held_decimal: "0",
  release_at: null,
  pending_action: null,
  return_to: null,
  sweep_failure: null,
  release_failure: null,
  transfers: [],
};

/** Paid by one transfer and held in escrow until release_at. */
export const paidPayment: PaymentObject = {
  ...newPayment,
  status: "paid",
  amount_received: "49900000",
  amount_received_decimal: "49.9",
  amount_remaining: "0",
  amount_remaining_decimal: "0",
  paid_at: at(1260),
  held: true,
  amount_held_decimal: "49.9",
  release_at: at(1260) + HOLD_SECONDS,
  return_to: CUSTOMER_ADDRESS,
  transfers: [
    {
      transaction_hash: HASHES.paymentTransfer,
      block_number: TRANSFER_BLOCK,
      log_index: 41,
      timestamp: at(1200),
      from: CUSTOMER_ADDRESS,
      amount: "49900000",
      amount_decimal: "49.9",
    },
  ],
};

export const canceledPayment: PaymentObject = { ...newPayment, status: "canceled", canceled_at: at(600) };

export const returnPayment: ReturnPayment = { address: CUSTOMER_ADDRESS };

/** As POST /v1/payments/{id}/return answers: the return is submitted, `payment.reversed` follows. */
export const returningPayment: PaymentObject = { ...paidPayment, pending_action: "return" };
