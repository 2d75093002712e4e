/**
 * Step 7 of a billing round: advance warnings, each checked once per period (the check's chain time is
 * cleared in the same transaction, and the event key (subscription, period, reason) makes a second event
 * impossible). None for a charge already due: billing it sets the next period's checks.
 * - `discount.ending_above_cap`: a week before a discount ends into a charge above the cap;
 * - `schedule.upcoming_charge_at_risk`: three days before a charge that will not fit, one per reason.
 */
import { Effect } from "effect";
import { Outbox } from "../../events/outbox.ts";
import { MandateStore } from "../../mandates/mandate-store.ts";
import { formatDecimal } from "../../money/decimal.ts";
import { SubscriptionStore, type WarningCheck } from "../subscription-store.ts";
import { Subscriptions } from "../subscriptions.ts";
import { draftUpcomingCharge, readOutlook } from "../upcoming-charge.ts";
import { atRiskReasons } from "../warnings.ts";
import { BATCH, type BillingRound, eachInTransaction } from "./round.ts";

/** Locks a subscription whose check is due, clears it, and returns it when a warning may apply. */
const dueForCheck = (round: BillingRound, id: string, check: WarningCheck) =>
  Effect.gen(function* () {
    const store = yield* SubscriptionStore;
    const [row] = yield* store.lock([id], { kind: "check_due", check, now: round.now });
    if (!row) return undefined;
    yield* store.clearCheck(id, check);
    const billing = row.status === "trialing" || row.status === "active" || row.status === "past_due";
    return billing && !row.cancel_at_period_end && row.pause_behavior === null ? row : undefined;
  });

const warnDiscountEnding = (round: BillingRound, id: string) =>
  Effect.gen(function* () {
    const subscriptions = yield* Subscriptions;
    const outbox = yield* Outbox;
    const row = yield* dueForCheck(round, id, "discount_warning_at");
    if (!row || row.discount_end_period === null) return;
    const upcoming = yield* draftUpcomingCharge({
      chain: round.chain,
      subscription: row,
      rendered: subscriptions.render(row),
      price: yield* round.price(row.price_id),
      period: row.discount_end_period,
    });
    if (upcoming.amount <= BigInt(row.cap)) return;
    yield* outbox.raise({
      merchantId: row.merchant_id,
      livemode: row.livemode,
      type: "discount.ending_above_cap",
      object: {
        ...upcoming.object,
        reason: "mandate_cap_exceeded",
        discount_ends_at: upcoming.object.charge_at,
      },
      key: `${id}:discount_ending_above_cap:${row.discount_end_period}`,
    });
  });

const warnChargeAtRisk = (round: BillingRound, id: string) =>
  Effect.gen(function* () {
    const subscriptions = yield* Subscriptions;
    const mandates = yield* MandateStore;
    const outbox = yield* Outbox;
    const row = yield* dueForCheck(round, id, "at_risk_check_at");
    if (!row) return;
    // A trial's first charge is for period 0, at the trial's end (the mandate's anchor).
    const period = row.current_period === null ? 0 : row.current_period + 1;
    const upcoming = yield* draftUpcomingCharge({
      chain: round.chain,
      subscription: row,
      rendered: subscriptions.render(row),
      price: yield* round.price(row.price_id),
      period,
    });
    const outlook = yield* readOutlook(round.chain, yield* mandates.reload(row.mandate_id), upcoming.amount);
    const decimal = (units: bigint) => formatDecimal(units, upcoming.decimals);
    yield* outbox.raise(
      ...atRiskReasons(outlook).map((reason) => ({
        merchantId: row.merchant_id,
        livemode: row.livemode,
        type: "schedule.upcoming_charge_at_risk" as const,
        object: {
          ...upcoming.object,
          reason,
          approval_left_decimal: decimal(outlook.approvalLeft),
          balance_decimal: decimal(outlook.balance),
          allowance_decimal: decimal(outlook.allowance),
        },
        key: `${id}:upcoming_charge_at_risk:${period}:${reason}`,
      })),
    );
  });

export const advanceWarnings = (round: BillingRound) =>
  Effect.gen(function* () {
    const store = yield* SubscriptionStore;
    const discountEnding = yield* store.checksDue(round.chain.id, "discount_warning_at", round.now, BATCH);
    yield* eachInTransaction(discountEnding, (id) => warnDiscountEnding(round, id));
    const atRisk = yield* store.checksDue(round.chain.id, "at_risk_check_at", round.now, BATCH);
    yield* eachInTransaction(atRisk, (id) => warnChargeAtRisk(round, id));
    return discountEnding.length === BATCH || atRisk.length === BATCH;
  });
