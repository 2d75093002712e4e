/**
 * The invoice a subscription would get for a period, from its price, its coupon's window and the
 * billable usage of the period before: what billing writes at a boundary, and what a usage record is
 * checked against before it is accepted as billable.
 */
import { Effect, Result } from "effect";
import { SqlClient } from "effect/sql";
import type { ResolvedChain } from "../chains/config.ts";
import { tokenOf } from "../mandates/mandate-object.ts";
import { parseDecimal } from "../money/decimal.ts";
import { computeInvoice, discountApplies, type InvoiceDiscount } from "./invoice-math.ts";
import type { PriceRow } from "./prices.ts";
import type { SubscriptionRow } from "./subscription-object.ts";

export interface DiscountWindow {
  readonly start: number | null;
  readonly end: number | null;
}

export const draftInvoice = (input: {
  readonly chain: ResolvedChain | undefined;
  readonly subscription: SubscriptionRow;
  readonly price: PriceRow;
  readonly period: number;
  /** Usage not yet recorded, counted with the previous period's (a record being checked). */
  readonly extraUsage?: bigint;
}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const { subscription: row, price, period } = input;
    const decimals = tokenOf(input.chain, price.token_address)?.decimals ?? 0;
    let window: DiscountWindow = { start: null, end: null };
    let discount: InvoiceDiscount | null = null;
    if (row.coupon_id !== null) {
      const [coupon] = yield* sql<{
        percent_off_bps: number | null;
        amount_off_decimal: string | null;
        duration_in_months: number;
      }>`SELECT percent_off_bps, amount_off_decimal, duration_in_months FROM billing.coupons WHERE id = ${row.coupon_id}`;
      if (coupon) {
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
    }
    let usage = null;
    if (price.usage_unit_amount !== null && price.usage_unit !== null) {
      const [used] = yield* sql<{ quantity: string }>`SELECT COALESCE(sum(quantity), 0)::text AS quantity
        FROM billing.usage_records WHERE subscription_id = ${row.id} AND period = ${period - 1} AND status = 'billable'`;
      usage = {
        quantity: BigInt(used?.quantity ?? "0") + (input.extraUsage ?? 0n),
        unitAmount: BigInt(price.usage_unit_amount),
        unit: price.usage_unit,
      };
    }
    const totals = computeInvoice({
      productName: price.product_name,
      amount: BigInt(price.amount),
      discount,
      usage,
    });
    return { totals, window };
  });
