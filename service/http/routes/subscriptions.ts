import { Effect } from "effect";
import { listOf } from "../../chains/objects.ts";
import { InvalidRequest, invalidParam } from "../../errors.ts";
import { CouponObject, Coupons, CreateCoupon, ListCouponsQuery } from "../../subscriptions/coupons.ts";
import { InvoiceObject } from "../../subscriptions/invoice-object.ts";
import { PlanChanges, UpdateSubscription } from "../../subscriptions/plan-changes.ts";
import {
  CreatePrice,
  ListPricesQuery,
  PriceObject,
  Prices,
  UpdatePrice,
} from "../../subscriptions/prices.ts";
import { SubscriptionObject } from "../../subscriptions/subscription-object.ts";
import {
  CancelSubscription,
  CreateSubscription,
  ListInvoicesQuery,
  ListSubscriptionsQuery,
  Subscriptions,
} from "../../subscriptions/subscriptions.ts";
import {
  CreateUsageRecord,
  ListUsageRecordsQuery,
  Usage,
  UsageRecordObject,
} from "../../subscriptions/usage.ts";
import { IDS, page } from "../examples/shared.ts";
import {
  cancelingSubscription,
  cancelSubscription,
  coupon,
  createCoupon,
  createPrice,
  createSubscription,
  createUsageRecord,
  inactivePrice,
  invoice,
  newSubscription,
  price,
  subscription,
  updatedSubscription,
  updatePrice,
  updateSubscription,
  usageRecord,
} from "../examples/subscriptions.ts";
import { couponIdParam, invoiceIdParam, priceIdParam, subscriptionIdParam } from "../path-params.ts";
import { defineRoute } from "../route.ts";

const withPrices = Effect.service(Prices);
const withCoupons = Effect.service(Coupons);
const withSubscriptions = Effect.service(Subscriptions);
const withUsage = Effect.service(Usage);
const withPlanChanges = Effect.service(PlanChanges);

export const subscriptionRoutes = [
  defineRoute({
    method: "POST",
    path: "/v1/prices",
    operationId: "createPrice",
    tag: "Prices",
    summary: "Create a price",
    description: "Adds a monthly price to your catalogue (a fixed amount, optionally a metered part).",
    body: CreatePrice,
    response: PriceObject,
    examples: { request: createPrice, response: price },
    handler: ({ caller, body }) => Effect.flatMap(withPrices, (prices) => prices.create(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/prices",
    operationId: "listPrices",
    tag: "Prices",
    summary: "List prices",
    description: "Your prices, newest first; filter by `active`.",
    body: ListPricesQuery,
    response: listOf(PriceObject, "PriceList"),
    examples: { response: page(price) },
    handler: ({ caller, body }) => Effect.flatMap(withPrices, (prices) => prices.list(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/prices/{id}",
    params: { id: priceIdParam },
    operationId: "retrievePrice",
    tag: "Prices",
    summary: "Retrieve a price",
    response: PriceObject,
    examples: { params: { id: IDS.price }, response: price },
    handler: ({ caller, params }) =>
      Effect.flatMap(withPrices, (prices) => prices.retrieve(caller, params.id ?? "")),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/prices/{id}",
    params: { id: priceIdParam },
    operationId: "updatePrice",
    tag: "Prices",
    summary: "Update a price",
    description:
      "Deactivates (or reactivates) a price. A deactivated price takes no new subscriptions; existing ones keep billing.",
    body: UpdatePrice,
    response: PriceObject,
    examples: { params: { id: IDS.price }, request: updatePrice, response: inactivePrice },
    handler: ({ caller, params, body }) =>
      Effect.flatMap(withPrices, (prices) => prices.update(caller, params.id ?? "", body)),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/coupons",
    operationId: "createCoupon",
    tag: "Coupons",
    summary: "Create a coupon",
    description: "A percentage or an amount off each invoice for `duration_in_months` months.",
    body: CreateCoupon,
    response: CouponObject,
    examples: { request: createCoupon, response: coupon },
    handler: ({ caller, body }) => Effect.flatMap(withCoupons, (coupons) => coupons.create(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/coupons",
    operationId: "listCoupons",
    tag: "Coupons",
    summary: "List coupons",
    description: "Your coupons, newest first.",
    body: ListCouponsQuery,
    response: listOf(CouponObject, "CouponList"),
    examples: { response: page(coupon) },
    handler: ({ caller, body }) => Effect.flatMap(withCoupons, (coupons) => coupons.list(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/coupons/{id}",
    params: { id: couponIdParam },
    operationId: "retrieveCoupon",
    tag: "Coupons",
    summary: "Retrieve a coupon",
    response: CouponObject,
    examples: { params: { id: IDS.coupon }, response: coupon },
    handler: ({ caller, params }) =>
      Effect.flatMap(withCoupons, (coupons) => coupons.retrieve(caller, params.id ?? "")),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/subscriptions",
    operationId: "createSubscription",
    tag: "Subscriptions",
    summary: "Create a subscription",
    description:
      "Subscribes a customer to a price; send them to `authorization_url` to authorise the mandate. Opens the subscription's mandate (cap: `cap_decimal`, default the price's monthly amount; required for a metered price). The first invoice is charged as soon as the customer has authorised; then one invoice per calendar month of the mandate. A price on a chain whose subscriptions_available is false: 400 `chain_closed`. A deactivated price: 400 `price_inactive`.",
    body: CreateSubscription,
    response: SubscriptionObject,
    examples: {
      request: createSubscription,
      response: newSubscription,
      errors: [
        invalidParam(
          "price",
          `Price ${IDS.price} is deactivated: it takes no new subscriptions (existing ones keep billing).`,
          "price_inactive",
        ),
        invalidParam(
          "cap_decimal",
          "cap_decimal 10 is below the first invoice's 15.992 USDC: it could not be collected.",
          "cap_too_low",
        ),
      ],
    },
    // Reads the price, coupon and chain head and writes the mandate and the subscription, nothing else:
    // a duplicate's run rolls back whole.
    transactional: true,
    handler: ({ caller, body }) =>
      Effect.flatMap(withSubscriptions, (subscriptions) => subscriptions.create(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/subscriptions",
    operationId: "listSubscriptions",
    tag: "Subscriptions",
    summary: "List subscriptions",
    description: "Your subscriptions, newest first; filter by customer and status.",
    body: ListSubscriptionsQuery,
    response: listOf(SubscriptionObject, "SubscriptionList"),
    examples: { response: page(subscription) },
    handler: ({ caller, body }) =>
      Effect.flatMap(withSubscriptions, (subscriptions) => subscriptions.list(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/subscriptions/{id}",
    params: { id: subscriptionIdParam },
    operationId: "retrieveSubscription",
    tag: "Subscriptions",
    summary: "Retrieve a subscription",
    response: SubscriptionObject,
    examples: { params: { id: IDS.subscription }, response: subscription },
    handler: ({ caller, params }) =>
      Effect.flatMap(withSubscriptions, (subscriptions) => subscriptions.retrieve(caller, params.id ?? "")),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/subscriptions/{id}",
    params: { id: subscriptionIdParam },
    operationId: "updateSubscription",
    tag: "Subscriptions",
    summary: "Update a subscription",
    description:
      "Changes the price or coupon (prorated on the next invoice), or pauses and resumes collection. A change never charges: with `proration_behavior` `create_prorations` (default) the old price's unused time is credited and the new price's remaining time charged as `proration` lines on the next invoice; a downgrade's credit that outweighs an invoice carries to the next ones (`credit_balance_decimal`). `effective: period_end` makes the change at the next boundary, without prorations. When the next invoice with the change (or the new price alone) would exceed the mandate's cap, the change becomes `pending_update` (`payment_behavior` `pending_if_incomplete`, the default), `schedule.upcoming_charge_at_risk` is raised at once, and it applies once the customer has signed a higher cap at `authorization_url`; it expires at `expires_at`. A price in another chain or token than the mandate's: 400 `price_not_applicable`.",
    body: UpdateSubscription,
    response: SubscriptionObject,
    examples: {
      params: { id: IDS.subscription },
      request: updateSubscription,
      response: updatedSubscription,
      errors: [
        invalidParam(
          "price",
          `Price ${IDS.upgradePrice} is in DAI on chain 31337; subscription ${IDS.subscription}'s mandate collects USDC on chain 31337.`,
          "price_not_applicable",
        ),
      ],
    },
    // Reads the chain head and writes the subscription and its events, nothing else.
    transactional: true,
    handler: ({ caller, params, body }) =>
      Effect.flatMap(withPlanChanges, (changes) => changes.update(caller, params.id ?? "", body)),
  }),
  defineRoute({
    method: "DELETE",
    path: "/v1/subscriptions/{id}/pending_update",
    params: { id: subscriptionIdParam },
    operationId: "cancelSubscriptionPendingUpdate",
    tag: "Subscriptions",
    summary: "Cancel a pending update",
    description: "Drops the subscription's pending update or scheduled change; its price stays as it is.",
    response: SubscriptionObject,
    examples: {
      params: { id: IDS.subscription },
      response: subscription,
      errors: [
        new InvalidRequest({
          code: "pending_update_missing",
          message: `Subscription ${IDS.subscription} has no pending or scheduled change.`,
          param: null,
        }),
      ],
    },
    handler: ({ caller, params }) =>
      Effect.flatMap(withPlanChanges, (changes) => changes.cancelPending(caller, params.id ?? "")),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/subscriptions/{id}/cancel",
    params: { id: subscriptionIdParam },
    operationId: "cancelSubscription",
    tag: "Subscriptions",
    summary: "Cancel a subscription",
    description:
      "Now (open invoices are voided), or with `at_period_end` at the end of the period last invoiced.",
    body: CancelSubscription,
    response: SubscriptionObject,
    examples: {
      params: { id: IDS.subscription },
      request: cancelSubscription,
      response: cancelingSubscription,
      errors: [
        new InvalidRequest({
          code: "subscription_canceled",
          message: `Subscription ${IDS.subscription} is already canceled.`,
          param: null,
        }),
      ],
    },
    handler: ({ caller, params, body }) =>
      Effect.flatMap(withSubscriptions, (subscriptions) =>
        subscriptions.cancel(caller, params.id ?? "", body),
      ),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/subscriptions/{id}/usage_records",
    params: { id: subscriptionIdParam },
    operationId: "createUsageRecord",
    tag: "Subscriptions",
    summary: "Create a usage record",
    description:
      "Records usage of a metered subscription; billed with the next month's invoice. Usage that would take the next invoice above the mandate's cap is recorded with status `over_limit`, never charged, and raises `usage.limit_exceeded`. Idempotent through Idempotency-Key like every POST. A subscription without a metered price: 400 `subscription_not_metered`; incomplete or canceled: 400 `subscription_not_billing`.",
    body: CreateUsageRecord,
    response: UsageRecordObject,
    examples: {
      params: { id: IDS.subscription },
      request: createUsageRecord,
      response: usageRecord,
      errors: [
        new InvalidRequest({
          code: "subscription_not_metered",
          message: `Price ${IDS.price} has no metered part, so subscription ${IDS.subscription} takes no usage.`,
          param: null,
        }),
      ],
    },
    handler: ({ caller, params, body }) =>
      Effect.flatMap(withUsage, (usage) => usage.record(caller, params.id ?? "", body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/subscriptions/{id}/usage_records",
    params: { id: subscriptionIdParam },
    operationId: "listUsageRecords",
    tag: "Subscriptions",
    summary: "List usage records",
    description: "A subscription's usage records, newest first.",
    body: ListUsageRecordsQuery,
    response: listOf(UsageRecordObject, "UsageRecordList"),
    examples: { params: { id: IDS.subscription }, response: page(usageRecord) },
    handler: ({ caller, params, body }) =>
      Effect.flatMap(withUsage, (usage) => usage.list(caller, params.id ?? "", body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/invoices",
    operationId: "listInvoices",
    tag: "Invoices",
    summary: "List invoices",
    description: "Your subscriptions' invoices, newest first; filter by subscription.",
    body: ListInvoicesQuery,
    response: listOf(InvoiceObject, "InvoiceList"),
    examples: { response: page(invoice) },
    handler: ({ caller, body }) =>
      Effect.flatMap(withSubscriptions, (subscriptions) => subscriptions.listInvoices(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/invoices/{id}",
    params: { id: invoiceIdParam },
    operationId: "retrieveInvoice",
    tag: "Invoices",
    summary: "Retrieve an invoice",
    description: "The invoice with its lines.",
    response: InvoiceObject,
    examples: { params: { id: IDS.invoice }, response: invoice },
    handler: ({ caller, params }) =>
      Effect.flatMap(withSubscriptions, (subscriptions) =>
        subscriptions.retrieveInvoice(caller, params.id ?? ""),
      ),
  }),
];
