/** Examples of the price, coupon, subscription, usage and invoice routes. */
import type { CouponObject, CreateCoupon } from "../../subscriptions/coupons.ts";
import type { InvoiceObject } from "../../subscriptions/invoice-object.ts";
import type { UpdateSubscription } from "../../subscriptions/plan-changes.ts";
import type { CreatePrice, PriceObject, UpdatePrice } from "../../subscriptions/prices.ts";
import type { SubscriptionObject } from "../../subscriptions/subscription-object.ts";
import type { CancelSubscription, CreateSubscription } from "../../subscriptions/subscriptions.ts";
import type { CreateUsageRecord, UsageRecordObject } from "../../subscriptions/usage.ts";
import { at, CHAIN, IDS, PUBLIC_URL, USDC } from "./shared.ts";

const MONTH = 31 * 86_400;

export const createPrice: CreatePrice = {
  product_name: "Pro plan",
  amount_decimal: "19.99",
  chain: CHAIN.id,
  token: "USDC",
  usage: { unit_amount_decimal: "0.002", unit: "API call" },
};

export const price: PriceObject = {
  id: IDS.price,
  object: "price",
  livemode: false,
  active: true,
  product_name: "Pro plan",
  chain: CHAIN.id,
  token: USDC.symbol,
  interval: "month",
  amount_decimal: "19.99",
  usage: { unit_amount_decimal: "0.002", unit: "API call" },
  created: at(30),
};

export const updatePrice: typeof UpdatePrice.Type = { active: false };
export const inactivePrice: PriceObject = { ...price, active: false };

export const createCoupon: CreateCoupon = { name: "Launch: 20% off", percent_off: 20, duration_in_months: 3 };

export const coupon: CouponObject = {
  id: IDS.coupon,
  object: "coupon",
  livemode: false,
  name: "Launch: 20% off",
  percent_off: 20,
  amount_off_decimal: null,
  token: null,
  duration_in_months: 3,
  created: at(40),
};

export const createSubscription: CreateSubscription = {
  customer: "cus_4821",
  price: IDS.price,
  coupon: IDS.coupon,
  cap_decimal: "40.00",
  approval_periods: 12,
};

/** As POST /v1/subscriptions answers: waiting for the customer to authorise its mandate. */
export const newSubscription: SubscriptionObject = {
  id: IDS.subscription,
  object: "subscription",
  livemode: false,
  status: "incomplete",
  customer: "cus_4821",
  price: IDS.price,
  mandate: IDS.subscriptionMandate,
  authorization_url: `${PUBLIC_URL}/authorize/Zp8cN4vQw2HtK7mXr5LbJ9sD`,
  chain: CHAIN.id,
  token: USDC.symbol,
  cap_decimal: "40",
  discount: { coupon: IDS.coupon, start_period: null, end_period: null },
  current_period: null,
  next_billing_at: null,
  cancel_at_period_end: false,
  canceled_at: null,
  cancellation_reason: null,
  cancellation_source: null,
  latest_invoice: null,
  trial_start: null,
  trial_end: null,
  pause_collection: null,
  pending_update: null,
  scheduled_change: null,
  credit_balance_decimal: "0",
  created: at(180),
};

/** Authorised and billed for its first period. */
export const subscription: SubscriptionObject = {
  ...newSubscription,
  status: "active",
  discount: { coupon: IDS.coupon, start_period: 0, end_period: 3 },
  current_period: { index: 0, start: at(1500), end: at(1500) + MONTH },
  next_billing_at: at(1500) + MONTH,
  latest_invoice: IDS.invoice,
};

export const cancelSubscription: typeof CancelSubscription.Type = { at_period_end: true };
export const cancelingSubscription: SubscriptionObject = {
  ...subscription,
  cancel_at_period_end: true,
  cancellation_source: "api",
};

/** An upgrade half-way through the period, within the cap: made at once, prorated on the next invoice. */
export const updateSubscription: UpdateSubscription = {
  price: IDS.upgradePrice,
  proration_behavior: "create_prorations",
};
export const updatedSubscription: SubscriptionObject = { ...subscription, price: IDS.upgradePrice };

export const createUsageRecord: typeof CreateUsageRecord.Type = { quantity: 1200 };

export const usageRecord: UsageRecordObject = {
  id: IDS.usageRecord,
  object: "usage_record",
  livemode: false,
  subscription: IDS.subscription,
  quantity: 1200,
  period: 0,
  status: "billable",
  created: at(9000),
};

export const invoice: InvoiceObject = {
  id: IDS.invoice,
  object: "invoice",
  livemode: false,
  status: "paid",
  subscription: IDS.subscription,
  customer: "cus_4821",
  chain: CHAIN.id,
  token: USDC.symbol,
  period: 0,
  period_start: at(1500),
  period_end: at(1500) + MONTH,
  lines: [
    { kind: "price", description: "Pro plan", quantity: "1", amount_decimal: "19.99" },
    { kind: "discount", description: `Coupon ${IDS.coupon}`, quantity: "1", amount_decimal: "-3.998" },
  ],
  subtotal_decimal: "19.99",
  discount_decimal: "3.998",
  total_decimal: "15.992",
  starting_credit_decimal: "0",
  ending_credit_decimal: "0",
  amount_paid_decimal: "15.992",
  amount_remaining_decimal: "0",
  amount_returned_decimal: "0",
  returned_at: null,
  failure_code: null,
  charge: IDS.invoiceCharge,
  attempt_count: 1,
  next_payment_attempt: null,
  paid_at: at(1512),
  created: at(1500),
};
