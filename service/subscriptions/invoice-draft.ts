/**
 * The invoice a subscription would get for a period, from its price, its coupon's window and the
 * billable usage of the period before: what billing writes at a boundary, and what a usage record is
 * checked against before it is accepted as billable.
 */
import { Context, Effect, Layer, Result } from "effect";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import { parseDecimal } from "../money/decimal.ts";
import { Coupons } from "./coupons.ts";
import { computeInvoice, discountApplies, type InvoiceDiscount, type InvoiceTotals } from "./invoice-math.ts";
import type { PriceRow } from "./prices.ts";
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
      const metered =
        price.usage_unit_amount !== null && price.usage_unit !== null
          ? {
              quantity: (yield* usage.billableQuantity(row.id, period - 1)) + (input.extraUsage ?? 0n),
              unitAmount: BigInt(price.usage_unit_amount),
              unit: price.usage_unit,
            }
          : null;
      const totals: InvoiceTotals = computeInvoice({
        productName: price.product_name,
        amount: BigInt(price.amount),
        discount,
        usage: metered,
      });
      return { totals, window };
    });

  return { draft };
});

export class InvoiceDrafts extends Context.Service<InvoiceDrafts>()("InvoiceDrafts", { make }) {
  static readonly layer = Layer.effect(InvoiceDrafts, make);
}
