/** A one-time payment record as stored, and as the API shows it. */
import { Schema } from "effect";
import { getAddress } from "viem";
import { amountRemaining, PAYMENT_STATUSES } from "../../src/ledger/payment-machine.ts";
import {
  TRANSFER_FAILURE_CODES,
  TransferFailureObject,
  transferFailureObject,
} from "../chains/blocked-transfers.ts";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import { formatDecimal } from "../money/decimal.ts";

export const PaymentRow = Schema.Struct({
  id: Schema.String,
  merchant_id: Schema.String,
  livemode: Schema.Boolean,
  chain_id: Schema.Number,
  token_address: Schema.String,
  payee_address: Schema.String,
  operator_address: Schema.String,
  hold_seconds: Schema.Number,
  onchain_id: Schema.String,
  deposit_address: Schema.String,
  page_token: Schema.String,
  amount: Schema.String,
  received: Schema.String,
  seen: Schema.String,
  held: Schema.String,
  release_at: Schema.NullOr(Schema.Number),
  status: Schema.Literals(PAYMENT_STATUSES),
  closed: Schema.Boolean,
  reference: Schema.NullOr(Schema.String),
  description: Schema.NullOr(Schema.String),
  expires_at: Schema.Number,
  watch_until: Schema.Number,
  created_block: Schema.Number,
  transitions: Schema.Number,
  paid_at: Schema.NullOr(Schema.Number),
  canceled_at: Schema.NullOr(Schema.Number),
  sweep_due: Schema.Boolean,
  sweeps: Schema.Number,
  sweep_purpose: Schema.NullOr(Schema.String),
  pending_action: Schema.NullOr(Schema.Literals(["release", "return"])),
  pending_action_purpose: Schema.NullOr(Schema.String),
  return_to: Schema.NullOr(Schema.String),
  sweep_failure_code: Schema.NullOr(Schema.Literals(TRANSFER_FAILURE_CODES)),
  sweep_failure_message: Schema.NullOr(Schema.String),
  sweep_failed_since: Schema.NullOr(Schema.Date),
  sweep_retry_at: Schema.NullOr(Schema.Date),
  release_failure_code: Schema.NullOr(Schema.Literals(TRANSFER_FAILURE_CODES)),
  release_failure_message: Schema.NullOr(Schema.String),
  release_failed_since: Schema.NullOr(Schema.Date),
  release_retry_at: Schema.NullOr(Schema.Date),
  created_at: Schema.Date,
});
export type PaymentRow = typeof PaymentRow.Type;

/** Columns in the shape PaymentRow decodes; `p` is billing.payments. */
export const PAYMENT_COLUMNS = `p.id, p.merchant_id, p.livemode, p.chain_id::int AS chain_id, p.token_address,
  p.payee_address, p.operator_address, p.hold_seconds::int AS hold_seconds, p.onchain_id, p.deposit_address,
  p.page_token, p.amount::text AS amount, p.received::text AS received, p.seen::text AS seen,
  p.held::text AS held, p.release_at::float8 AS release_at, p.status, p.closed, p.reference, p.description,
  p.expires_at::float8 AS expires_at, p.watch_until::float8 AS watch_until,
  p.created_block::float8 AS created_block, p.transitions, p.paid_at::float8 AS paid_at,
  p.canceled_at::float8 AS canceled_at, p.sweep_due, p.sweeps, p.sweep_purpose, p.pending_action,
  p.pending_action_purpose, p.return_to, p.sweep_failure_code, p.sweep_failure_message, p.sweep_failed_since,
  p.sweep_retry_at, p.release_failure_code, p.release_failure_message, p.release_failed_since,
  p.release_retry_at, p.created_at`;

/** A payer's transfer to the deposit address, as the deposit watcher saw it. */
export const TransferRow = Schema.Struct({
  payment_id: Schema.String,
  tx_hash: Schema.String,
  log_index: Schema.Number,
  from_address: Schema.String,
  amount: Schema.String,
  block_number: Schema.Number,
  timestamp: Schema.Number,
});
export type TransferRow = typeof TransferRow.Type;

const Decimal = Schema.String.annotate({ description: "Decimal amount in the token's units" });
const Units = Schema.String.annotate({ description: "Amount in token base units (integer string)" });

export const TransferObject = Schema.Struct({
  transaction_hash: Schema.String,
  block_number: Schema.Int,
  log_index: Schema.Int,
  timestamp: Schema.Int.annotate({ description: "Unix seconds (the block's time)" }),
  from: Schema.String.annotate({ description: "The address the tokens came from" }),
  amount: Units,
  amount_decimal: Decimal,
}).annotate({ identifier: "PaymentTransfer" });

export const PaymentObject = Schema.Struct({
  id: Schema.String.annotate({ description: "pay_…" }),
  object: Schema.Literal("payment"),
  livemode: Schema.Boolean,
  status: Schema.Literals(PAYMENT_STATUSES).annotate({
    description:
      "requires_payment: nothing has arrived; processing: something arrived, not yet all of it or not yet confirmed; paid: the confirmed amount received covers the amount (fulfil on payment.paid); underpaid: expired with part of the amount received; expired: expired with nothing received; canceled: you canceled it before anything arrived; reversed: it was paid or underpaid, then the funds were returned or a reorg took them out. See docs/payments.md for every transition.",
  }),
  amount: Units,
  amount_decimal: Decimal,
  amount_received: Units.annotate({
    description: "Confirmed received and still standing, in base units (above `amount` when overpaid)",
  }),
  amount_received_decimal: Decimal,
  amount_remaining: Units,
  amount_remaining_decimal: Decimal.annotate({ description: "amount − amount_received, at least 0" }),
  amount_pending_decimal: Decimal.annotate({
    description: "Arrived at the deposit address (or being swept) but not confirmed yet",
  }),
  token: Schema.String.annotate({ description: "Token symbol" }),
  token_address: Schema.String,
  chain: Schema.Int,
  address: Schema.String.annotate({
    description:
      "The deposit address: send the token here with a plain transfer, from any wallet or exchange",
  }),
  payment_url: Schema.String.annotate({
    description: "The hosted pay page (amount, address, QR code, wallet button, live status)",
  }),
  reference: Schema.NullOr(Schema.String),
  description: Schema.NullOr(Schema.String),
  expires_at: Schema.Int.annotate({ description: "Unix seconds (chain time)" }),
  created: Schema.Int.annotate({ description: "Unix seconds" }),
  paid_at: Schema.NullOr(Schema.Int).annotate({ description: "Chain time the payment last became paid" }),
  canceled_at: Schema.NullOr(Schema.Int),
  held: Schema.Boolean.annotate({ description: "Whether received funds wait in escrow until release_at" }),
  amount_held_decimal: Decimal,
  release_at: Schema.NullOr(Schema.Int).annotate({
    description: "Unix seconds when the hold ends and the service releases the funds to you",
  }),
  pending_action: Schema.NullOr(Schema.Literals(["release", "return"])).annotate({
    description: "A release or return of the held funds submitted and not yet confirmed",
  }),
  return_to: Schema.NullOr(Schema.String).annotate({ description: "Where a return sends the held funds" }),
  sweep_failure: Schema.NullOr(TransferFailureObject).annotate({
    description:
      "Set while the funds at the deposit address cannot be swept (e.g. your payout address is blacklisted by the token's issuer): they stay at the address and move by themselves once the cause is cleared",
  }),
  release_failure: Schema.NullOr(TransferFailureObject).annotate({
    description:
      "Set while the held funds cannot be released to you (e.g. your payout address is blacklisted): they stay in escrow and are released by themselves once the cause is cleared",
  }),
  transfers: Schema.Array(TransferObject).annotate({
    description: "The payers' transfers to the deposit address, oldest first",
  }),
}).annotate({ identifier: "Payment" });
export type PaymentObject = typeof PaymentObject.Type;

export const machineOf = (row: PaymentRow) => ({
  status: row.status,
  amount: BigInt(row.amount),
  received: BigInt(row.received),
  seen: BigInt(row.seen),
  closed: row.closed,
});

export const toPaymentObject = (
  row: PaymentRow,
  transfers: ReadonlyArray<TransferRow>,
  chain: ResolvedChain | undefined,
  publicUrl: string,
): PaymentObject => {
  const token = tokenOf(chain, row.token_address);
  const decimals = token?.decimals ?? 0;
  const remaining = amountRemaining(machineOf(row));
  const held = BigInt(row.held);
  return {
    id: row.id,
    object: "payment",
    livemode: row.livemode,
    status: row.status,
    amount: row.amount,
    amount_decimal: formatDecimal(BigInt(row.amount), decimals),
    amount_received: row.received,
    amount_received_decimal: formatDecimal(BigInt(row.received), decimals),
    amount_remaining: remaining.toString(),
    amount_remaining_decimal: formatDecimal(remaining, decimals),
    amount_pending_decimal: formatDecimal(BigInt(row.seen), decimals),
    token: token?.symbol ?? "?",
    token_address: row.token_address,
    chain: row.chain_id,
    address: getAddress(row.deposit_address),
    payment_url: `${publicUrl}/pay/${row.page_token}`,
    reference: row.reference,
    description: row.description,
    expires_at: row.expires_at,
    created: Math.floor(row.created_at.getTime() / 1000),
    paid_at: row.paid_at,
    canceled_at: row.canceled_at,
    held: held > 0n,
    amount_held_decimal: formatDecimal(held, decimals),
    release_at: held > 0n ? row.release_at : null,
    pending_action: row.pending_action,
    return_to: row.return_to,
    sweep_failure: transferFailureObject(
      row.sweep_failure_code,
      row.sweep_failure_message,
      row.sweep_failed_since,
      row.sweep_retry_at,
    ),
    release_failure: transferFailureObject(
      row.release_failure_code,
      row.release_failure_message,
      row.release_failed_since,
      row.release_retry_at,
    ),
    transfers: transfers.map((t) => ({
      transaction_hash: t.tx_hash,
      block_number: t.block_number,
      log_index: t.log_index,
      timestamp: t.timestamp,
      from: getAddress(t.from_address),
      amount: t.amount,
      amount_decimal: formatDecimal(BigInt(t.amount), decimals),
    })),
  };
};
