/**
 * The invoice a subscription would get for a period, from its price, its coupon's window, the billable
 * usage of the period before (each record at the price it was recorded under), the proration lines
 * waiting for the next invoice and the subscription's credit: what billing writes at a boundary, what a
 * usage record or a plan change is checked against (on a copy of the row with the change made), and
 * what the advance warnings announce.
 */
import { Context, Effect, Layer, Result } from "effect";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import { parseDecimal } from "../money/decimal.ts";
import { Coupons } from "./coupons.ts";
import {
  computeInvoice,
  discountApplies,
  type InvoiceDiscount,
  type InvoiceTotals,
  type InvoiceUsage,
} from "./invoice-math.ts";
import { type PriceRow, Prices } from "./prices.ts";
import type { SubscriptionRow } from "./subscription-object.ts";
import { UsageStore } from "./usage-store.ts";

export interface DiscountWindow {
  readonly start: number | null;
  readonly end: number | null;
}

export interface DraftRequest {
  readonly chain: ResolvedChain | undefined;
  readonly subscription: SubscriptionRow;
  readonly price: PriceRow;
  readonly period: number;
  /** Usage not yet recorded, counted with the previous period's (a record being checked). */
  readonly extraUsage?: bigint;
}

export interface Draft {
  readonly totals: InvoiceTotals;
  readonly window: DiscountWindow;
  /** What the price costs a period with the discount in force then (no usage, no credit). */
  readonly recurring: bigint;
}

const make = Effect.gen(function* () {
  const coupons = yield* Coupons;
  const usage = yield* UsageStore;
  const prices = yield* Prices;

  /**
   * The drafts of several subscriptions' invoices, in order, reading their usage and coupons with one
   * statement each whatever their number (a boundary drafts a batch of subscriptions at once).
   */
  const draftMany = (inputs: ReadonlyArray<DraftRequest>) =>
    Effect.gen(function* () {
      const usageOf = yield* usage.billableQuantities(
        inputs.map(({ subscription, period }) => ({ subscriptionId: subscription.id, period: period - 1 })),
      );
      const couponOf = yield* coupons.byIds(
        inputs.flatMap(({ subscription }) =>
          subscription.coupon_id === null ? [] : [subscription.coupon_id],
        ),
      );
      const drafts: Draft[] = [];
      for (const input of inputs) {
        const { subscription: row, price, period } = input;
        const decimals = tokenOf(input.chain, price.token_address)?.decimals ?? 0;
        let window: DiscountWindow = { start: null, end: null };
        let discount: InvoiceDiscount | null = null;
        const coupon = row.coupon_id === null ? undefined : couponOf.get(row.coupon_id);
        if (row.coupon_id !== null && coupon !== undefined) {
          window =
            row.discount_start_period === null
              ? { start: period, end: period + coupon.duration_in_months }
              : { start: row.discount_start_period, end: row.discount_end_period };
          const amountOff =
            coupon.amount_off_decimal === null
              ? null
              : parseDecimal(coupon.amount_off_decimal, decimals, 2n ** 256n);
          if (discountApplies(period, window))
            discount = {
              coupon: row.coupon_id,
              percentOffBps: coupon.percent_off_bps,
              amountOff: amountOff && Result.isSuccess(amountOff) ? amountOff.success : null,
            };
        }
        // Read whatever the price now: usage recorded under an earlier, metered price is still billed.
        const quantities = new Map<string, bigint>();
        for (const { price_id, quantity } of usageOf.get(row.id) ?? []) quantities.set(price_id, quantity);
        if (input.extraUsage !== undefined)
          quantities.set(price.id, (quantities.get(price.id) ?? 0n) + input.extraUsage);
        const metered: InvoiceUsage[] = [];
        for (const [priceId, quantity] of quantities) {
          const under = priceId === price.id ? price : yield* prices.byId(priceId);
          if (under.usage_unit_amount !== null && under.usage_unit !== null)
            metered.push({
              productName: under.product_name,
              quantity,
              unitAmount: BigInt(under.usage_unit_amount),
              unit: under.usage_unit,
            });
        }
        const totals: InvoiceTotals = computeInvoice({
          productName: price.product_name,
          amount: BigInt(price.amount),
          discount,
          usage: metered,
          prorations: row.prorations.map((p) => ({ description: p.description, amount: BigInt(p.amount) })),
          credit: BigInt(row.credit_balance),
        });
        // What the price costs a period from then on (its discount in force then, no usage, no credit): a
        // plan change must fit the cap with it as well as with the next invoice.
        const recurring = computeInvoice({
          productName: price.product_name,
          amount: BigInt(price.amount),
          discount,
          usage: [],
        }).total;
        drafts.push({ totals, window, recurring });
      }
      return drafts;
    });

  const draft = (input: DraftRequest) => Effect.map(draftMany([input]), (drafts) => drafts[0] as Draft);

  return { draft, draftMany };
});

export class InvoiceDrafts extends Context.Service<InvoiceDrafts>()("InvoiceDrafts", { make }) {
  static readonly layer = Layer.effect(InvoiceDrafts, make);
}
