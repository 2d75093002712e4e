/**
 * Advance warnings: what will stop a subscription's next charge, decided ahead of time so the merchant
 * can act (ask for a new mandate with a higher cap, a new signature, or a top-up) before the charge
 * fails. Pure: billing gathers the facts (drafted invoice, chain reads) and raises one event per reason.
 */

const DAY = 86_400;

/** `schedule.upcoming_charge_at_risk` is checked this long before each period's charge. */
export const AT_RISK_LEAD_SECONDS = 3 * DAY;
/** `subscription.trial_will_end` comes this long before a trial ends (Stripe's three days). */
export const TRIAL_NOTICE_LEAD_SECONDS = 3 * DAY;
/** `discount.ending_above_cap` comes this long before the first undiscounted period starts. */
export const DISCOUNT_ENDING_LEAD_SECONDS = 7 * DAY;

/** The same codes a failed charge reports, so a merchant handles a warning and a failure alike. */
export const AT_RISK_REASONS = ["mandate_cap_exceeded", "approval_exhausted", "insufficient_funds"] as const;
export type AtRiskReason = (typeof AT_RISK_REASONS)[number];

export interface ChargeOutlook {
  /** The drafted invoice's total for the coming period. */
  readonly amount: bigint;
  readonly cap: bigint;
  /** What the customer's signature still allows in total (the escrow's `approvalLeft`). */
  readonly approvalLeft: bigint;
  readonly balance: bigint;
  /** The escrow's ERC-20 allowance from the customer's wallet. */
  readonly allowance: bigint;
}

/**
 * Every reason the coming charge would fail, in a fixed order; empty when it fits. An allowance too low
 * counts as `insufficient_funds` only while the approval suffices: a new signature renews both (its
 * permit sets the allowance to the new approval), so the approval's reason alone names the fix.
 */
export const atRiskReasons = (outlook: ChargeOutlook): AtRiskReason[] => {
  if (outlook.amount === 0n) return [];
  const reasons: AtRiskReason[] = [];
  const approvalShort = outlook.approvalLeft < outlook.amount;
  if (outlook.amount > outlook.cap) reasons.push("mandate_cap_exceeded");
  if (approvalShort) reasons.push("approval_exhausted");
  if (outlook.balance < outlook.amount || (outlook.allowance < outlook.amount && !approvalShort))
    reasons.push("insufficient_funds");
  return reasons;
};

/** When a warning about the charge at `chargeAt` falls due. */
export const atRiskCheckAt = (chargeAt: number) => chargeAt - AT_RISK_LEAD_SECONDS;
export const discountWarningAt = (firstUndiscountedStart: number) =>
  firstUndiscountedStart - DISCOUNT_ENDING_LEAD_SECONDS;
