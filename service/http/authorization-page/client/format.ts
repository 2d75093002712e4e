/** Plain-words text for the page; pure, so the wording is unit-tested. */
import { plural } from "../../hosted-page/client/text.ts";
import type { Session } from "./types.ts";

export { plural, sameAddress, shortAddress } from "../../hosted-page/client/text.ts";

/** "up to 25 USDC per month" */
export const capText = (session: Session) =>
  `up to ${session.cap_decimal} ${session.token.symbol} per ${session.period}`;

/** "300 USDC in total over 12 months, then you'll be asked to sign again" */
export const approvalText = (session: Session) =>
  `${session.approval_decimal} ${session.token.symbol} in total over ${plural(session.approval_periods, session.period)}, then you'll be asked to sign again`;

/** A duration in the largest whole unit: "1 hour", "7 days", "90 seconds". */
export const durationText = (seconds: number): string => {
  for (const [unit, size] of [
    ["day", 86_400],
    ["hour", 3_600],
    ["minute", 60],
  ] as const) {
    if (seconds >= size && seconds % size === 0) return plural(seconds / size, unit);
  }
  return plural(seconds, "second");
};

/** null when payments are not held. */
export const holdText = (session: Session): string | null =>
  session.hold_seconds > 0
    ? `Each payment is held in escrow for ${durationText(session.hold_seconds)} before ${session.merchant.name} receives it.`
    : null;
