/** A charge record as stored, and as the API shows it. */
import { Schema } from "effect";
import {
  TRANSFER_FAILURE_CODES,
  TransferFailureObject,
  transferFailureObject,
} from "../chains/blocked-transfers.ts";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import { formatDecimal } from "../money/decimal.ts";

export const CHARGE_STATUSES = ["pending", "succeeded", "released", "returned", "failed"] as const;
export const FAILURE_CODES = [
  "insufficient_funds",
  "approval_exhausted",
  "customer_blocked",
  "payout_address_blocked",
  "token_paused",
  "processing_error",
] as const;
export type FailureCode = (typeof FAILURE_CODES)[number];

export const ChargeRow = Schema.Struct({
  id: Schema.String,
  merchant_id: Schema.String,
  livemode: Schema.Boolean,
  mandate_id: Schema.String,
  chain_id: Schema.Number,
  token_address: Schema.String,
  amount: Schema.String,
  period: Schema.Number,
  status: Schema.Literals(CHARGE_STATUSES),
  failure_code: Schema.NullOr(Schema.Literals(FAILURE_CODES)),
  failure_message: Schema.NullOr(Schema.String),
  onchain_id: Schema.NullOr(Schema.String),
  relayer_purpose: Schema.NullOr(Schema.String),
  pending_action: Schema.NullOr(Schema.Literals(["release", "return"])),
  release_at: Schema.NullOr(Schema.Number),
  block_number: Schema.NullOr(Schema.Number),
  block_hash: Schema.NullOr(Schema.String),
  tx_hash: Schema.NullOr(Schema.String),
  log_index: Schema.NullOr(Schema.Number),
  charged_at: Schema.NullOr(Schema.Number),
  ended_block_number: Schema.NullOr(Schema.Number),
  ended_tx_hash: Schema.NullOr(Schema.String),
  ended_log_index: Schema.NullOr(Schema.Number),
  ended_at: Schema.NullOr(Schema.Number),
  release_failure_code: Schema.NullOr(Schema.Literals(TRANSFER_FAILURE_CODES)),
  release_failure_message: Schema.NullOr(Schema.String),
  release_failed_since: Schema.NullOr(Schema.Date),
  release_retry_at: Schema.NullOr(Schema.Date),
  created_at: Schema.Date,
});
export type ChargeRow = typeof ChargeRow.Type;

/** Columns in the shape ChargeRow decodes; `c` is billing.charges, `m` its mandate. */
export const CHARGE_COLUMNS = `c.id, c.merchant_id, c.livemode, c.mandate_id, c.chain_id::int AS chain_id,
  m.token_address, c.amount::text AS amount, c.period, c.status, c.failure_code, c.failure_message, c.onchain_id,
  c.relayer_purpose, c.pending_action, c.release_at::float8 AS release_at, c.block_number::float8 AS block_number,
  c.block_hash, c.tx_hash, c.log_index, c.charged_at::float8 AS charged_at,
  c.ended_block_number::float8 AS ended_block_number, c.ended_tx_hash, c.ended_log_index,
  c.ended_at::float8 AS ended_at, c.release_failure_code, c.release_failure_message, c.release_failed_since,
  c.release_retry_at, c.created_at`;

const Position = Schema.Struct({
  block_number: Schema.Int,
  block_hash: Schema.optionalKey(Schema.String),
  transaction_hash: Schema.String,
  log_index: Schema.Int,
  timestamp: Schema.Int,
});

export const ChargeObject = Schema.Struct({
  id: Schema.String.annotate({ description: "ch_…" }),
  object: Schema.Literal("charge"),
  livemode: Schema.Boolean,
  mandate: Schema.String,
  status: Schema.Literals(CHARGE_STATUSES).annotate({
    description:
      "pending: submitted, not yet on chain; succeeded: money left the customer (under a hold it is not yet yours); released: the hold ended and the money reached you; returned: the money went back to the customer; failed: see failure_code",
  }),
  failure_code: Schema.NullOr(Schema.Literals(FAILURE_CODES)).annotate({
    description:
      "insufficient_funds: the customer must top up; approval_exhausted: the customer must sign again at the mandate's authorization_url; customer_blocked: the token's issuer blacklisted the customer's wallet; payout_address_blocked: it blacklisted your payout address (yours to clear, not the customer's); token_paused: the issuer paused the token before the charge was mined; processing_error: the chain refused the charge for another reason",
  }),
  failure_message: Schema.NullOr(Schema.String),
  amount: Schema.String.annotate({ description: "Token base units" }),
  amount_decimal: Schema.String,
  token: Schema.String,
  token_address: Schema.String,
  chain: Schema.Int,
  period: Schema.Int.annotate({ description: "Index of the mandate's billing period (0 = the first month)" }),
  held: Schema.Boolean.annotate({ description: "Whether the money waits in escrow until release_at" }),
  release_at: Schema.NullOr(Schema.Int).annotate({
    description: "Unix seconds when the hold ends and the service releases the money to you",
  }),
  pending_action: Schema.NullOr(Schema.Literals(["release", "return"])).annotate({
    description: "A release or return submitted and not yet on chain",
  }),
  release_failure: Schema.NullOr(TransferFailureObject).annotate({
    description:
      "Set while the hold is over but the release is refused (e.g. your payout address is blacklisted by the token's issuer): the money stays in escrow and is released by itself once the cause is cleared",
  }),
  onchain_id: Schema.NullOr(Schema.String).annotate({ description: "The escrow's bytes32 charge id" }),
  onchain: Schema.NullOr(Position).annotate({ description: "Where the charge happened on chain" }),
  ended_onchain: Schema.NullOr(Position).annotate({ description: "Where it was released or returned" }),
  created: Schema.Int,
}).annotate({ identifier: "Charge" });
export type ChargeObject = typeof ChargeObject.Type;

export const toChargeObject = (row: ChargeRow, chain: ResolvedChain | undefined): ChargeObject => {
  const token = tokenOf(chain, row.token_address);
  return {
    id: row.id,
    object: "charge",
    livemode: row.livemode,
    mandate: row.mandate_id,
    status: row.status,
    failure_code: row.failure_code,
    failure_message: row.failure_message,
    amount: row.amount,
    amount_decimal: formatDecimal(BigInt(row.amount), token?.decimals ?? 0),
    token: token?.symbol ?? row.token_address,
    token_address: row.token_address,
    chain: row.chain_id,
    period: row.period,
    held: row.release_at !== null && row.release_at > 0,
    release_at: row.release_at !== null && row.release_at > 0 ? row.release_at : null,
    pending_action: row.pending_action,
    release_failure: transferFailureObject(
      row.release_failure_code,
      row.release_failure_message,
      row.release_failed_since,
      row.release_retry_at,
    ),
    onchain_id: row.onchain_id,
    onchain:
      row.block_number === null || row.tx_hash === null || row.log_index === null || row.charged_at === null
        ? null
        : {
            block_number: row.block_number,
            ...(row.block_hash === null ? {} : { block_hash: row.block_hash }),
            transaction_hash: row.tx_hash,
            log_index: row.log_index,
            timestamp: row.charged_at,
          },
    ended_onchain:
      row.ended_block_number === null ||
      row.ended_tx_hash === null ||
      row.ended_log_index === null ||
      row.ended_at === null
        ? null
        : {
            block_number: row.ended_block_number,
            transaction_hash: row.ended_tx_hash,
            log_index: row.ended_log_index,
            timestamp: row.ended_at,
          },
    created: Math.floor(row.created_at.getTime() / 1000),
  };
};
