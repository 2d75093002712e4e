/**
 * The rules of a plan change, pure: what a change mid-period credits and charges, whether it can apply
 * now or must wait for the customer's higher cap, and when a waiting change expires. Money is bigint
 * base units, time is chain time (unix seconds). Rules for users: docs/subscriptions.md, "Plan changes".
 *
 * **Rounding.** A change at time `t` in a period [start, end) of length L, from a price worth `old` to
 * one worth `new` a period (each after the period's percentage discount), is owed exactly
 * (new − old) × (end − t) / L. That net is rounded down to the token's smallest unit (the remainder
 * goes to the customer: charged a fraction less, or credited a fraction more); the charge line, for the
 * new price's remaining time, is rounded down too, and the credit line, for the old price's unused time,
 * is the difference. So each line is within one unit of its exact value and each change's net within
 * one unit, in the customer's favour; over any sequence of changes in a period, what was paid plus the
 * prorations is within one unit per change of the time-weighted prices.
 */
import { periodIndexAt, periodStart } from "../../src/ledger/period.ts";
import { discountOf } from "./invoice-math.ts";

/** Floor division of bigints (JavaScript's `/` truncates toward zero). */
const floorDiv = (a: bigint, b: bigint): bigint => {
  const q = a / b;
  return a % b !== 0n && a < 0n !== b < 0n ? q - 1n : q;
};

export interface ProrationInput {
  readonly periodStart: number;
  readonly periodEnd: number;
  /** When the change takes effect, within the period. */
  readonly at: number;
  /** The old and the new price's amount for a whole period, after the period's percentage discount. */
  readonly oldAmount: bigint;
  readonly newAmount: bigint;
}

export interface Proration {
  /** The old price's unused time, credited (≥ 0). */
  readonly credit: bigint;
  /** The new price's remaining time, charged (≥ 0). */
  readonly charge: bigint;
}

export const prorate = (input: ProrationInput): Proration => {
  const length = BigInt(input.periodEnd - input.periodStart);
  const left = BigInt(Math.min(Math.max(input.periodEnd - input.at, 0), input.periodEnd - input.periodStart));
  if (length <= 0n || left === 0n) return { credit: 0n, charge: 0n };
  const charge = floorDiv(input.newAmount * left, length);
  const net = floorDiv((input.newAmount - input.oldAmount) * left, length);
  return { credit: charge - net, charge };
};

/**
 * A price's amount for a period after the percentage discount in force then. An amount off is taken off
 * each invoice whatever the price, so it does not change with a plan change and does not enter here.
 */
export const discountedAmount = (amount: bigint, percentOffBps: number | null): bigint =>
  percentOffBps === null
    ? amount
    : amount - discountOf({ coupon: "", percentOffBps, amountOff: null }, amount);

export const PAYMENT_BEHAVIORS = ["pending_if_incomplete", "error_if_incomplete"] as const;
export type PaymentBehavior = (typeof PAYMENT_BEHAVIORS)[number];

/**
 * What becomes of a change: it applies when the mandate's cap in force covers both the next invoice with
 * it (prorations and credit included) and the invoices after it (the new price, its discount in force
 * then, no credit: a downgrade's credit runs out, the cap stays); otherwise it waits for a higher cap
 * (pending) or is refused, as asked. A change itself never charges: its prorations go on the next
 * invoice, so a period is charged once.
 */
export const decideChange = (
  totals: { readonly next: bigint; readonly recurring: bigint },
  cap: bigint,
  behavior: PaymentBehavior,
): "apply" | "pending" | "refuse" =>
  totals.next <= cap && totals.recurring <= cap
    ? "apply"
    : behavior === "pending_if_incomplete"
      ? "pending"
      : "refuse";

/**
 * When a change that waits for a higher cap expires: at the end of the first period billed after it
 * was asked for (the next boundary, `nextBillingAt`, or the one being billed when that is already due),
 * so the old price is billed at most once more meanwhile.
 */
export const pendingExpiresAt = (anchor: number, nextBillingAt: number, now: number): number => {
  const boundary = periodIndexAt(anchor, Math.max(nextBillingAt, now)) ?? 0;
  return periodStart(anchor, boundary + 1);
};

const isoDate = (time: number) => new Date(time * 1000).toISOString().slice(0, 10);

/**
 * The two lines a change at `at` adds to the next invoice: the old price's unused time credited
 * (negative) and the new price's remaining time charged; none when nothing of the period is left.
 */
export const prorationLines = (
  input: ProrationInput & { readonly oldName: string; readonly newName: string },
): ReadonlyArray<{ readonly description: string; readonly amount: bigint }> => {
  const { credit, charge } = prorate(input);
  const since = isoDate(input.at);
  return [
    ...(credit > 0n
      ? [{ description: `Unused time on ${input.oldName} from ${since}`, amount: -credit }]
      : []),
    ...(charge > 0n
      ? [{ description: `Remaining time on ${input.newName} from ${since}`, amount: charge }]
      : []),
  ];
};
