/**
 * The `upcoming_charge` object carried by the advance warnings: the invoice a subscription will be
 * charged for a coming period, with what stands in its way. Drafted by the same code billing uses, and
 * read against the chain (the customer's balance and the escrow's allowance) at the time of the warning.
 */
import { Effect } from "effect";
import type { Hex } from "viem";
import { periodStart } from "../../src/ledger/period.ts";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import type { MandateRow } from "../mandates/mandate-object.ts";
import { TokenReads } from "../mandates/token-reads.ts";
import { formatDecimal } from "../money/decimal.ts";
import { InvoiceDrafts } from "./invoice-draft.ts";
import type { InvoiceTotals } from "./invoice-math.ts";
import { signedDecimal } from "./invoice-object.ts";
import type { PriceRow } from "./prices.ts";
import type { SubscriptionObject, SubscriptionRow } from "./subscription-object.ts";
import type { AtRiskReason, ChargeOutlook } from "./warnings.ts";

/** The warnings' `data.object` (docs/subscriptions.md, "Advance warnings"). */
export interface UpcomingChargeObject {
  readonly object: "upcoming_charge";
  readonly livemode: boolean;
  readonly subscription: string;
  readonly customer: string;
  readonly mandate: string;
  /** The period the charge is for, and when it starts and is charged (chain time). */
  readonly period: number;
  readonly charge_at: number;
  /** The drafted invoice's total, and its lines (prorations of plan changes included). */
  readonly amount_decimal: string;
  readonly lines: ReadonlyArray<{
    readonly kind: string;
    readonly description: string;
    readonly quantity: string;
    readonly amount_decimal: string;
  }>;
  readonly cap_decimal: string;
  readonly token: string;
  readonly chain: number;
  readonly reason: AtRiskReason | null;
  readonly approval_left_decimal: string | null;
  readonly balance_decimal: string | null;
  readonly allowance_decimal: string | null;
  /** discount.ending_above_cap: when the first undiscounted period starts. */
  readonly discount_ends_at: number | null;
  readonly authorization_url: string;
}

/** The warnings' object for a charge of `amount` at `period`'s start (reasons and balances filled later). */
export const upcomingChargeObject = (input: {
  readonly chain: ResolvedChain | undefined;
  readonly subscription: SubscriptionRow;
  readonly rendered: SubscriptionObject;
  readonly period: number;
  readonly totals: InvoiceTotals;
}): UpcomingChargeObject => {
  const { subscription } = input;
  const decimals = tokenOf(input.chain, subscription.token_address)?.decimals ?? 0;
  return {
    object: "upcoming_charge",
    livemode: subscription.livemode,
    subscription: subscription.id,
    customer: subscription.customer,
    mandate: subscription.mandate_id,
    period: input.period,
    charge_at: periodStart(subscription.anchor, input.period),
    amount_decimal: formatDecimal(input.totals.total, decimals),
    lines: input.totals.lines.map((line) => ({
      kind: line.kind,
      description: line.description,
      quantity: String(line.quantity),
      amount_decimal: signedDecimal(BigInt(line.amount), decimals),
    })),
    cap_decimal: input.rendered.cap_decimal,
    token: input.rendered.token,
    chain: subscription.chain_id,
    reason: null,
    approval_left_decimal: null,
    balance_decimal: null,
    allowance_decimal: null,
    discount_ends_at: null,
    authorization_url: input.rendered.authorization_url,
  };
};

/** The drafted charge for `period`, rendered without chain reads (reasons and balances filled later). */
export const draftUpcomingCharge = (input: {
  readonly chain: ResolvedChain;
  readonly subscription: SubscriptionRow;
  readonly rendered: SubscriptionObject;
  readonly price: PriceRow;
  readonly period: number;
}) =>
  Effect.gen(function* () {
    const drafts = yield* InvoiceDrafts;
    const { totals } = yield* drafts.draft({ ...input });
    const decimals = tokenOf(input.chain, input.subscription.token_address)?.decimals ?? 0;
    return {
      amount: totals.total,
      decimals,
      object: upcomingChargeObject({ ...input, totals }),
    };
  });

/** The customer's side of the coming charge: approval left (indexed), balance and allowance (chain). */
export const readOutlook = (chain: ResolvedChain, mandate: MandateRow, amount: bigint) =>
  Effect.gen(function* () {
    const tokens = yield* TokenReads;
    const customer = mandate.customer_address as Hex | null;
    const token = mandate.token_address as Hex;
    const [balance, allowance] =
      customer === null
        ? [0n, 0n]
        : yield* Effect.all(
            [
              tokens.balance(chain, token, customer),
              tokens.allowance(chain, token, customer, chain.escrow.address),
            ],
            { concurrency: 2 },
          );
    const outlook: ChargeOutlook = {
      amount,
      cap: BigInt(mandate.cap),
      approvalLeft: BigInt(mandate.approval_left ?? "0"),
      balance,
      allowance,
    };
    return outlook;
  });
