/** A subscription as stored (with its mandate's terms), and as the API shows it. */
import { Schema } from "effect";
import { periodStart } from "../../src/ledger/period.ts";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import { authorizationUrl } from "../mandates/mandate-object.ts";
import { formatDecimal } from "../money/decimal.ts";

export const SUBSCRIPTION_STATUSES = ["incomplete", "trialing", "active", "past_due", "canceled"] as const;
export const CANCELLATION_REASONS = ["requested", "payment_failed", "mandate_revoked"] as const;
/** Who asked for the cancellation: you (the API, the console) or the customer (the portal). */
export const CANCELLATION_SOURCES = ["api", "portal"] as const;
export type CancellationSource = (typeof CANCELLATION_SOURCES)[number];
export type SubscriptionStatus = (typeof SUBSCRIPTION_STATUSES)[number];
/** While collection is paused, each period's invoice is written void (not owed) or uncollectible (owed, not collected). */
export const PAUSE_BEHAVIORS = ["void", "mark_uncollectible"] as const;
export type PauseBehavior = (typeof PAUSE_BEHAVIORS)[number];
export const PRORATION_BEHAVIORS = ["create_prorations", "none"] as const;
export type ProrationBehavior = (typeof PRORATION_BEHAVIORS)[number];
/** When a plan change takes effect: at once (with prorations), or at the next period boundary. */
export const CHANGE_EFFECTIVE = ["now", "period_end"] as const;

/** A proration line waiting for the next invoice (base units, negative for unused time credited). */
export const StoredProration = Schema.Struct({
  description: Schema.String,
  amount: Schema.String,
  price: Schema.String,
  period: Schema.Number,
  from: Schema.Number,
  to: Schema.Number,
});
export type StoredProration = typeof StoredProration.Type;

/**
 * The one change of price or coupon not yet in force: `pending` until the mandate's cap in force covers
 * the next invoice with it (Stripe's pending update), or `scheduled` for the next period boundary.
 */
export const PendingChange = Schema.Struct({
  state: Schema.Literals(["pending", "scheduled"]),
  price: Schema.String,
  coupon: Schema.NullOr(Schema.String),
  /** Whether the coupon is replaced (its discount then starts again with the next invoice). */
  coupon_changed: Schema.Boolean,
  proration_behavior: Schema.Literals(PRORATION_BEHAVIORS),
  effective: Schema.Literals(CHANGE_EFFECTIVE),
  /** The next invoice with the change, the cap and the period when it was last checked (base units). */
  amount: Schema.String,
  cap: Schema.String,
  period: Schema.NullOr(Schema.Number),
  created: Schema.Number,
  expires_at: Schema.NullOr(Schema.Number),
  /** Names its events (the warning raised when it became pending). */
  key: Schema.String,
});
export type PendingChange = typeof PendingChange.Type;

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
  trial_start: Schema.NullOr(Schema.Number),
  trial_end: Schema.NullOr(Schema.Number),
  trial_notice_at: Schema.NullOr(Schema.Number),
  pause_behavior: Schema.NullOr(Schema.Literals(PAUSE_BEHAVIORS)),
  pause_resumes_at: Schema.NullOr(Schema.Number),
  credit_balance: Schema.String,
  prorations: Schema.Array(StoredProration),
  pending_change: Schema.NullOr(PendingChange),
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
  s.discount_warning_at::float8 AS discount_warning_at, s.trial_start::float8 AS trial_start,
  s.trial_end::float8 AS trial_end, s.trial_notice_at::float8 AS trial_notice_at, s.pause_behavior,
  s.pause_resumes_at::float8 AS pause_resumes_at, s.credit_balance::text AS credit_balance, s.prorations,
  s.pending_change, s.created_at, m.status AS mandate_status, m.anchor::float8 AS anchor, m.cap::text AS cap,
  m.token_address, m.authorization_token`;
export const SUBSCRIPTION_FROM = "billing.subscriptions s JOIN billing.mandates m ON m.id = s.mandate_id";

export const SubscriptionObject = Schema.Struct({
  id: Schema.String.annotate({ description: "sub_…" }),
  object: Schema.Literal("subscription"),
  livemode: Schema.Boolean,
  status: Schema.Literals(SUBSCRIPTION_STATUSES).annotate({
    description:
      "incomplete: waiting for the customer to authorise (authorization_url); trialing: authorised, nothing charged until trial_end; active; past_due: the latest invoice failed and is being retried; canceled: ended for good (see cancellation_reason)",
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
  trial_start: Schema.NullOr(Schema.Int),
  trial_end: Schema.NullOr(Schema.Int).annotate({
    description: "Chain time the trial ends: the first period starts and is charged then",
  }),
  pause_collection: Schema.NullOr(
    Schema.Struct({
      behavior: Schema.Literals(PAUSE_BEHAVIORS),
      resumes_at: Schema.NullOr(Schema.Int),
    }),
  ).annotate({
    description:
      "Collection paused: each period starting meanwhile gets an invoice written void (not owed) or uncollectible, and nothing is charged or retried",
  }),
  pending_update: Schema.NullOr(
    Schema.Struct({
      price: Schema.String,
      coupon: Schema.NullOr(Schema.String),
      proration_behavior: Schema.Literals(PRORATION_BEHAVIORS),
      effective: Schema.Literals(CHANGE_EFFECTIVE),
      amount_due_decimal: Schema.String.annotate({
        description: "The next invoice with the change, above the mandate's cap",
      }),
      created: Schema.Int,
      expires_at: Schema.Int,
    }),
  ).annotate({
    description:
      "A change waiting for the customer to sign a higher cap at authorization_url; it applies as soon as the cap in force covers the next invoice with it",
  }),
  scheduled_change: Schema.NullOr(
    Schema.Struct({
      price: Schema.String,
      coupon: Schema.NullOr(Schema.String),
      effective_at: Schema.NullOr(Schema.Int),
    }),
  ).annotate({ description: "A change that takes effect at the next period boundary (no prorations)" }),
  credit_balance_decimal: Schema.String.annotate({
    description: "Credit from downgrades, taken off the next invoices",
  }),
  created: Schema.Int,
}).annotate({ identifier: "Subscription" });
export type SubscriptionObject = typeof SubscriptionObject.Type;

export const toSubscriptionObject = (
  row: SubscriptionRow,
  chain: ResolvedChain | undefined,
  publicUrl: string,
): SubscriptionObject => {
  const token = tokenOf(chain, row.token_address);
  const decimals = token?.decimals ?? 0;
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
    cap_decimal: formatDecimal(BigInt(row.cap), decimals),
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
    trial_start: row.trial_start,
    trial_end: row.trial_end,
    pause_collection:
      row.pause_behavior === null ? null : { behavior: row.pause_behavior, resumes_at: row.pause_resumes_at },
    pending_update:
      row.pending_change?.state !== "pending"
        ? null
        : {
            price: row.pending_change.price,
            coupon: row.pending_change.coupon,
            proration_behavior: row.pending_change.proration_behavior,
            effective: row.pending_change.effective,
            amount_due_decimal: formatDecimal(BigInt(row.pending_change.amount), decimals),
            created: row.pending_change.created,
            expires_at: row.pending_change.expires_at ?? row.pending_change.created,
          },
    scheduled_change:
      row.pending_change?.state !== "scheduled"
        ? null
        : {
            price: row.pending_change.price,
            coupon: row.pending_change.coupon,
            effective_at: row.status === "canceled" ? null : row.next_billing_at,
          },
    credit_balance_decimal: formatDecimal(BigInt(row.credit_balance), decimals),
    created: Math.floor(row.created_at.getTime() / 1000),
  };
};
