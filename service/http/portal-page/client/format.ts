/** Plain-words text for the portal page; pure, so the wording is unit-tested. */
import type { Mandate, Session } from "./types.ts";

export { plural, sameAddress, shortAddress } from "../../hosted-page/client/text.ts";

/** "12 Dec 2026" (UTC, the chain's calendar). */
export const dateText = (unixSeconds: number) =>
  new Date(unixSeconds * 1000).toLocaleDateString("en-GB", {
    day: "numeric",
    month: "short",
    year: "numeric",
    timeZone: "UTC",
  });

/** "28 Nov 2026, 17:05 UTC": a hold's end is often within the day. */
export const dateTimeText = (unixSeconds: number) =>
  `${dateText(unixSeconds)}, ${new Date(unixSeconds * 1000).toLocaleTimeString("en-GB", {
    hour: "2-digit",
    minute: "2-digit",
    timeZone: "UTC",
  })} UTC`;

export const amountText = (decimal: string, symbol: string) => `${decimal} ${symbol}`;

/** "Up to 25 USDC per month" */
export const capText = (mandate: Mandate) =>
  `Up to ${amountText(mandate.cap_decimal, mandate.token.symbol)} per ${mandate.period}`;

const CHARGE_WORDS = {
  pending: "processing",
  succeeded: "paid",
  released: "paid",
  returned: "returned to you",
  failed: "failed",
} as const;

/** "10 USDC · paid" (a held one: "paid, held until 19 Dec 2026"). */
export const chargeText = (mandate: Mandate, charge: Mandate["recent_charges"][number]) => {
  const hold = mandate.holds.find((h) => h.charge === charge.id);
  const words =
    hold === undefined
      ? CHARGE_WORDS[charge.status]
      : `paid, held in escrow until ${dateTimeText(hold.release_at)}`;
  return `${amountText(charge.amount_decimal, mandate.token.symbol)} · ${words}`;
};

export const MANDATE_STATUS_WORDS: Record<Mandate["status"], string> = {
  pending: "Waiting for your signature",
  active: "Active",
  requires_authorization: "Needs your signature",
  revoked: "Revoked",
};

export const SUBSCRIPTION_STATUS_WORDS: Record<Session["subscriptions"][number]["status"], string> = {
  incomplete: "Waiting for your signature",
  trialing: "Free trial",
  active: "Active",
  past_due: "Payment overdue",
  canceled: "Canceled",
};
