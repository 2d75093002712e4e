/**
 * The catalogue of every event name the service emits: the one source for `GET /v1/event_types`,
 * the `type` filter of `GET /v1/events` and the check of `events` when a webhook endpoint is registered
 * (a misspelt name is an error, not a silent endpoint).
 */
import { Schema } from "effect";

export const EVENT_CATALOGUE = [
  { type: "mandate.authorized", description: "The customer signed the mandate (also after a re-sign)." },
  {
    type: "mandate.revoked",
    description: "The customer revoked the mandate on chain; it cannot be charged again.",
  },
  {
    type: "mandate.cap_change_requested",
    description:
      "You asked for a higher cap (POST /v1/mandates/{id}); data.object.pending_update says which. Send the customer to authorization_url to sign it; the old cap stays in force until then.",
  },
  {
    type: "mandate.cap_changed",
    description:
      "A new cap is in force on chain: a raise the customer signed (also reported as mandate.authorized), or a lower one you asked for, once mined.",
  },
  {
    type: "mandate.insufficient",
    description: "A charge failed because the customer's balance or allowance cannot cover it (top up).",
  },
  {
    type: "mandate.requires_authorization",
    description: "The approval (cap × approval_periods) is spent; send the customer to authorization_url.",
  },
  {
    type: "charge.succeeded",
    description: "Money left the customer. Under escrow holds the merchant does not have it yet.",
  },
  {
    type: "charge.failed",
    description:
      "A charge failed and nothing moved; failure_code says why (insufficient_funds, approval_exhausted, customer_blocked, payout_address_blocked, token_paused, processing_error).",
  },
  { type: "charge.released", description: "Under escrow holds, the merchant has the money: fulfil on this." },
  {
    type: "charge.release_failed",
    description:
      "A held charge's release was refused (release_failure says why, e.g. payout_address_blocked). The money stays in escrow and is released by itself once the cause is cleared; raised once per episode.",
  },
  { type: "charge.returned", description: "Under escrow holds, the money went back to the customer." },
  { type: "invoice.paid", description: "A subscription period was billed." },
  {
    type: "invoice.payment_failed",
    description:
      "A subscription invoice's charge failed (failure_code says why); next_payment_attempt says when it is retried (null: no retry left). Also when another charge of the invoice's period paid less than its total (failure_code period_already_charged, amount_remaining_decimal), and when the invoice's charge was returned to the customer during its hold, even after invoice.paid (failure_code charge_returned, amount_returned_decimal): neither is retried.",
  },
  {
    type: "subscription.canceled",
    description:
      "A subscription ended for good (cancellation_reason: requested, payment_failed, mandate_revoked).",
  },
  {
    type: "subscription.updated",
    description:
      "A subscription's price or coupon changed, a change was scheduled for the period's end or became a pending_update, or such a change was canceled; or it was set to end at its period's end (cancel_at_period_end true; cancellation_source says whether you or the customer, on the portal, asked).",
  },
  {
    type: "subscription.pending_update_applied",
    description:
      "A pending_update was applied once the mandate's cap in force covered it (the customer signed a higher cap).",
  },
  {
    type: "subscription.pending_update_expired",
    description: "A pending_update expired unapplied at its expires_at; the subscription keeps its price.",
  },
  {
    type: "subscription.trial_will_end",
    description:
      "Three days before a trial ends; the first period starts and is charged at trial_end (cancel before then and nothing is charged).",
  },
  {
    type: "subscription.paused",
    description:
      "Collection paused (pause_collection): each period starting meanwhile gets an invoice written void or uncollectible, nothing is charged and dunning stops.",
  },
  {
    type: "subscription.resumed",
    description:
      "Collection resumed (pause_collection cleared, or its resumes_at reached): the next period is charged.",
  },
  {
    type: "discount.ending_above_cap",
    description:
      "One week before a discount ends into a charge above the mandate's cap; data.object is an upcoming_charge.",
  },
  {
    type: "usage.limit_exceeded",
    description: "Metered usage above the authorised amount was recorded and not charged.",
  },
  {
    type: "schedule.upcoming_charge_at_risk",
    description:
      "Three days before a period's charge that will not fit; data.object is an upcoming_charge whose reason is mandate_cap_exceeded, approval_exhausted or insufficient_funds (one event per reason).",
  },
  {
    type: "payment.paid",
    description:
      "A one-time payment's confirmed amount received reached its amount (amount_received above amount when overpaid; also after an underpayment was topped up, or paid late): fulfil on this. Under escrow holds the funds reach you at release_at.",
  },
  {
    type: "payment.reversed",
    description:
      "A payment reported paid or underpaid no longer stands: you returned its held funds (POST /v1/payments/{id}/return), or a reorg took its transfer out. It is reported again (payment.paid once funds cover the amount, payment.underpaid once it has expired short of it) if funds arrive again.",
  },
  {
    type: "payment.sweep_failed",
    description:
      "The funds at a payment's deposit address could not be swept (sweep_failure says why, e.g. payout_address_blocked). They stay at the address and move by themselves once the cause is cleared; raised once per episode.",
  },
  {
    type: "payment.release_failed",
    description:
      "A payment's held funds could not be released to you (release_failure says why, e.g. payout_address_blocked). They stay in escrow and are released by themselves once the cause is cleared; raised once per episode.",
  },
  {
    type: "payment.underpaid",
    description:
      "A payment expired with part of its amount received (amount_remaining says what is missing); a later top-up that completes it raises payment.paid.",
  },
  {
    type: "webhook.test",
    description:
      "Sent to one endpoint by POST /v1/webhook_endpoints/{id}/test (the console's test button). Not a payment: never act on it.",
  },
] as const;

export type EventType = (typeof EVENT_CATALOGUE)[number]["type"];
export const EVENT_TYPES: readonly EventType[] = EVENT_CATALOGUE.map((entry) => entry.type);
const KNOWN: ReadonlySet<string> = new Set(EVENT_TYPES);
export const isEventType = (name: string): name is EventType => KNOWN.has(name);

export const EventTypeSchema = Schema.Literals(EVENT_TYPES);

export const EventTypeObject = Schema.Struct({
  object: Schema.Literal("event_type"),
  type: Schema.String,
  description: Schema.String,
}).annotate({ identifier: "EventType" });

export const eventTypeList = () => ({
  object: "list" as const,
  data: EVENT_CATALOGUE.map(({ type, description }) => ({
    object: "event_type" as const,
    type,
    description,
  })),
  has_more: false,
});
