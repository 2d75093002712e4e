/** A subscription as stored (with its mandate's terms), and as the API shows it. */
import { Schema } from "effect";
import { periodStart } from "../../src/ledger/period.ts";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import { authorizationUrl } from "../mandates/mandate-object.ts";
import { formatDecimal } from "../money/decimal.ts";

export const SUBSCRIPTION_STATUSES = ["incomplete", "active", "past_due", "canceled"] as const;
export const CANCELLATION_REASONS = ["requested", "payment_failed", "mandate_revoked"] as const;
/** Who asked for the cancellation: you (the API, the console) or the customer (the portal). */
export const CANCELLATION_SOURCES = ["api", "portal"] as const;
export type CancellationSource = (typeof CANCELLATION_SOURCES)[number];
export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];

export const SubscriptionRow = Schema.Struct({
  id: Schema.String,
  merchant_id: Schema.String,
  livemode: Schema.Boolean,
  customer: Schema.String,
  price_id: Schema.String,
  mandate_id: Schema.String,
  chain_id: Schema.Number,
  coupon_id: Schema.NullOr(Schema.String),
  discount_start_period: Schema.NullOr(Schema.Number),
  discount_end_period: Schema.NullOr(Schema.Number),
  status: Schema.Literals(SUBSCRIPTION_STATUSES),
  current_period: Schema.NullOr(Schema.Number),
  next_billing_at: Schema.NullOr(Schema.Number),
  cancel_at_period_end: Schema.Boolean,
  canceled_at: Schema.NullOr(Schema.Date),
  cancellation_reason: Schema.NullOr(Schema.Literals(CANCELLATION_REASONS)),
  cancellation_source: Schema.NullOr(Schema.Literals(CANCELLATION_SOURCES)),
  latest_invoice: Schema.NullOr(Schema.String),
  at_risk_check_at: Schema.NullOr(Schema.Number),
  discount_warning_at: Schema.NullOr(Schema.Number),
  created_at: Schema.Date,
  // From the mandate.
  mandate_status: Schema.String,
  anchor: Schema.Number,
  cap: Schema.String,
  token_address: Schema.String,
  authorization_token: Schema.String,
});
export type SubscriptionRow = typeof SubscriptionRow.Type;

export const SUBSCRIPTION_COLUMNS = `s.id, s.merchant_id, s.livemode, s.customer, s.price_id, s.mandate_id, s.chain_id,
  s.coupon_id, s.discount_start_period, s.discount_end_period, s.status, s.current_period,
  s.next_billing_at::float8 AS next_billing_at, s.cancel_at_period_end, s.canceled_at, s.cancellation_reason,
  s.cancellation_source, s.latest_invoice, s.at_risk_check_at::float8 AS at_risk_check_at,
  s.discount_warning_at::float8 AS discount_warning_at, s.created_at, m.status AS mandate_status, m.anchor::float8 AS anchor, m.cap::text AS cap,
  m.token_address, m.authorization_token`;
export const SUBSCRIPTION_FROM = "billing.subscriptions s JOIN billing.mandates m ON m.id = s.mandate_id";

export const SubscriptionObject = Schema.Struct({
  id: Schema.String.annotate({ description: "sub_…" }),
  object: Schema.Literal("subscription"),
  livemode: Schema.Boolean,
  status: Schema.Literals(SUBSCRIPTION_STATUSES).annotate({
    description:
      "incomplete: waiting for the customer to authorise (authorization_url); active; past_due: the latest invoice failed and is being retried; canceled: ended for good (see cancellation_reason)",
  }),
  customer: Schema.String,
  price: Schema.String,
  mandate: Schema.String.annotate({ description: "The mandate the subscription charges (mdt_…)" }),
  authorization_url: Schema.String,
  chain: Schema.Int,
  token: Schema.String,
  cap_decimal: Schema.String.annotate({
    description: "The mandate's cap: most a single invoice can collect",
  }),
  discount: Schema.NullOr(
    Schema.Struct({
      coupon: Schema.String,
      start_period: Schema.NullOr(Schema.Int),
      end_period: Schema.NullOr(Schema.Int).annotate({ description: "First period no longer discounted" }),
    }),
  ),
  current_period: Schema.NullOr(
    Schema.Struct({ index: Schema.Int, start: Schema.Int, end: Schema.Int }).annotate({
      description: "The period last invoiced (chain time, unix seconds)",
    }),
  ),
  next_billing_at: Schema.NullOr(Schema.Int).annotate({ description: "Chain time of the next invoice" }),
  cancel_at_period_end: Schema.Boolean,
  canceled_at: Schema.NullOr(Schema.Int),
  cancellation_reason: Schema.NullOr(Schema.Literals(CANCELLATION_REASONS)),
  cancellation_source: Schema.NullOr(Schema.Literals(CANCELLATION_SOURCES)).annotate({
    description:
      "Who asked to cancel: api (you, through the API or the console) or portal (the customer, on the customer portal); null when nobody asked",
  }),
  latest_invoice: Schema.NullOr(Schema.String),
  created: Schema.Int,
}).annotate({ identifier: "Subscription" });
export type SubscriptionObject = typeof SubscriptionObject.Type;

export const toSubscriptionObject = (
  row: SubscriptionRow,
  chain: ResolvedChain | undefined,
  publicUrl: string,
): SubscriptionObject => {
  const token = tokenOf(chain, row.token_address);
  return {
    id: row.id,
    object: "subscription",
    livemode: row.livemode,
    status: row.status,
    customer: row.customer,
    price: row.price_id,
    mandate: row.mandate_id,
    authorization_url: authorizationUrl(publicUrl, row.authorization_token),
    chain: row.chain_id,
    token: token?.symbol ?? row.token_address,
    cap_decimal: formatDecimal(BigInt(row.cap), token?.decimals ?? 0),
    discount:
      row.coupon_id === null
        ? null
        : {
            coupon: row.coupon_id,
            start_period: row.discount_start_period,
            end_period: row.discount_end_period,
          },
    current_period:
      row.current_period === null
        ? null
        : {
            index: row.current_period,
            start: periodStart(row.anchor, row.current_period),
            end: periodStart(row.anchor, row.current_period + 1),
          },
    next_billing_at: row.status === "canceled" ? null : row.next_billing_at,
    cancel_at_period_end: row.cancel_at_period_end,
    canceled_at: row.canceled_at === null ? null : Math.floor(row.canceled_at.getTime() / 1000),
    cancellation_reason: row.cancellation_reason,
    cancellation_source: row.cancellation_source,
    latest_invoice: row.latest_invoice,
    created: Math.floor(row.created_at.getTime() / 1000),
  };
};
