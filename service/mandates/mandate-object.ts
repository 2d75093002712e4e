/** A mandate record as stored, and as the API shows it. */
import { Schema } from "effect";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import { formatDecimal } from "../money/decimal.ts";

export const MANDATE_STATUSES = ["pending", "active", "requires_authorization", "revoked"] as const;
export type MandateStatus = (typeof MANDATE_STATUSES)[number];

export const MandateRow = Schema.Struct({
  id: Schema.String,
  merchant_id: Schema.String,
  livemode: Schema.Boolean,
  origin: Schema.Literals(["api", "chain"]),
  chain_id: Schema.Number,
  token_address: Schema.String,
  cap: Schema.String,
  period: Schema.Literal("month"),
  approval_periods: Schema.Number,
  customer: Schema.NullOr(Schema.String),
  reference: Schema.NullOr(Schema.String),
  payee_address: Schema.String,
  operator_address: Schema.String,
  hold_seconds: Schema.Number,
  anchor: Schema.Number,
  salt: Schema.String,
  authorization_token: Schema.String,
  status: Schema.Literals(MANDATE_STATUSES),
  customer_address: Schema.NullOr(Schema.String),
  onchain_id: Schema.NullOr(Schema.String),
  signature_version: Schema.NullOr(Schema.Number),
  approval_left: Schema.NullOr(Schema.String),
  last_charged_period: Schema.NullOr(Schema.Number),
  authorized_at: Schema.NullOr(Schema.Date),
  latest_charge: Schema.NullOr(Schema.String),
  pending_cap: Schema.NullOr(Schema.String),
  pending_cap_requested_at: Schema.NullOr(Schema.Date),
  created_at: Schema.Date,
});
export type MandateRow = typeof MandateRow.Type;

/** Columns in the shape MandateRow decodes (numbers that fit as numbers, money as text). */
export const MANDATE_COLUMNS = `id, merchant_id, livemode, origin, chain_id::int AS chain_id, token_address,
  cap::text AS cap, period, approval_periods, customer, reference, payee_address, operator_address,
  hold_seconds::int AS hold_seconds, anchor::float8 AS anchor, salt::text AS salt, authorization_token, status,
  customer_address, onchain_id, signature_version::float8 AS signature_version, approval_left::text AS approval_left,
  last_charged_period, authorized_at, latest_charge, pending_cap::text AS pending_cap, pending_cap_requested_at,
  created_at`;

const Decimal = Schema.String.annotate({ description: "Decimal amount in the token's units" });
const Units = Schema.String.annotate({ description: "Amount in token base units (integer string)" });

/** A raise of the cap waiting for the customer's signature at `authorization_url`. */
export const MandatePendingUpdate = Schema.Struct({
  cap: Units,
  cap_decimal: Decimal.annotate({ description: "The cap the customer is asked to sign" }),
  approval_decimal: Decimal.annotate({ description: "cap × approval_periods at the new cap" }),
  requested: Schema.Int.annotate({ description: "Unix seconds: when you asked for it" }),
}).annotate({ identifier: "MandatePendingUpdate" });

export const MandateObject = Schema.Struct({
  id: Schema.String.annotate({ description: "mdt_…" }),
  object: Schema.Literal("mandate"),
  livemode: Schema.Boolean,
  status: Schema.Literals(MANDATE_STATUSES).annotate({
    description:
      "pending: waiting for the customer's first signature; active: chargeable; requires_authorization: the approval is spent, send the customer to authorization_url; revoked: ended by the customer for good",
  }),
  chain: Schema.Int,
  token: Schema.String.annotate({ description: "Token symbol" }),
  token_address: Schema.String,
  cap: Units,
  cap_decimal: Decimal.annotate({
    description:
      "The cap in force: the most a charge may take per period. A lower cap is in force from the moment you ask for it; a higher one once the customer signed it (see pending_update)",
  }),
  pending_update: Schema.NullOr(MandatePendingUpdate).annotate({
    description:
      "A raise of the cap you asked for (POST /v1/mandates/{id}), waiting for the customer to sign it at authorization_url; charges stay within cap_decimal until then. null: none",
  }),
  period: Schema.Literal("month"),
  approval_periods: Schema.Int,
  approval_decimal: Decimal.annotate({ description: "cap × approval_periods: what one signature approves" }),
  approval_left_decimal: Schema.NullOr(Decimal).annotate({
    description: "What the current signature still allows; null before the first signature",
  }),
  customer: Schema.NullOr(Schema.String),
  reference: Schema.NullOr(Schema.String),
  authorization_url: Schema.String,
  customer_address: Schema.NullOr(Schema.String).annotate({
    description: "The customer's wallet (the vault charges are pulled from); null until it signs",
  }),
  payee_address: Schema.String,
  hold_seconds: Schema.Int,
  anchor: Schema.Int.annotate({
    description: "Unix seconds: period 0 starts here; period k starts k calendar months later",
  }),
  last_charged_period: Schema.NullOr(Schema.Int),
  signature_version: Schema.NullOr(Schema.Int),
  authorized: Schema.NullOr(Schema.Int).annotate({ description: "Unix seconds of the latest signature" }),
  latest_charge: Schema.NullOr(Schema.String),
  onchain_id: Schema.NullOr(Schema.String).annotate({ description: "The escrow's bytes32 mandate id" }),
  origin: Schema.Literals(["api", "chain"]).annotate({
    description: "api: opened with POST /v1/mandates; chain: signed directly on chain to your payout address",
  }),
  created: Schema.Int,
}).annotate({ identifier: "Mandate" });
export type MandateObject = typeof MandateObject.Type;

export const authorizationUrl = (publicUrl: string, token: string) => `${publicUrl}/authorize/${token}`;

export const toMandateObject = (
  row: MandateRow,
  chain: ResolvedChain | undefined,
  publicUrl: string,
): MandateObject => {
  const token = tokenOf(chain, row.token_address);
  const decimals = token?.decimals ?? 0;
  const cap = BigInt(row.cap);
  return {
    id: row.id,
    object: "mandate",
    livemode: row.livemode,
    status: row.status,
    chain: row.chain_id,
    token: token?.symbol ?? row.token_address,
    token_address: row.token_address,
    cap: row.cap,
    cap_decimal: formatDecimal(cap, decimals),
    pending_update:
      row.pending_cap === null
        ? null
        : {
            cap: row.pending_cap,
            cap_decimal: formatDecimal(BigInt(row.pending_cap), decimals),
            approval_decimal: formatDecimal(BigInt(row.pending_cap) * BigInt(row.approval_periods), decimals),
            requested: Math.floor((row.pending_cap_requested_at ?? row.created_at).getTime() / 1000),
          },
    period: row.period,
    approval_periods: row.approval_periods,
    approval_decimal: formatDecimal(cap * BigInt(row.approval_periods), decimals),
    approval_left_decimal:
      row.approval_left === null ? null : formatDecimal(BigInt(row.approval_left), decimals),
    customer: row.customer,
    reference: row.reference,
    authorization_url: authorizationUrl(publicUrl, row.authorization_token),
    customer_address: row.customer_address,
    payee_address: row.payee_address,
    hold_seconds: row.hold_seconds,
    anchor: row.anchor,
    last_charged_period: row.last_charged_period,
    signature_version: row.signature_version,
    authorized: row.authorized_at === null ? null : Math.floor(row.authorized_at.getTime() / 1000),
    latest_charge: row.latest_charge,
    onchain_id: row.onchain_id,
    origin: row.origin,
    created: Math.floor(row.created_at.getTime() / 1000),
  };
};
