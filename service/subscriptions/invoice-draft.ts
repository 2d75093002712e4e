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

const make = Effect.gen(function* () {
  const coupons = yield* Coupons;
  const usage = yield* UsageStore;
  const prices = yield* Prices;

  const draft = (input: DraftRequest) =>
    Effect.gen(function* () {
      const { subscription: row, price, period } = input;
      const decimals = tokenOf(input.chain, price.token_address)?.decimals ?? 0;
      let window: DiscountWindow = { start: null, end: null };
      let discount: InvoiceDiscount | null = null;
      const coupon = row.coupon_id === null ? undefined : yield* coupons.byId(row.coupon_id);
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
      for (const { price_id, quantity } of yield* usage.billableQuantities(row.id, period - 1))
        quantities.set(price_id, quantity);
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
      return { totals, window, recurring };
    });

  return { draft };
});

export class InvoiceDrafts extends Context.Service<InvoiceDrafts>()("InvoiceDrafts", { make }) {
  static readonly layer = Layer.effect(InvoiceDrafts, make);
}
