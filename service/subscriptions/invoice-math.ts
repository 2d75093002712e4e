/**
 * What a subscription's invoice for one period contains, as a pure function of the price, the
 * discount in force that period and the usage billed with it. Money is bigint base units throughout.
 *
 * - The price's amount is billed in advance for the period; usage is billed in arrears, with the next
 *   period's invoice (as Stripe bills metered prices).
 * - A discount applies to the subtotal. Percentages are rounded to the nearest base unit, halves in the
 *   customer's favour; an amount off never takes the total below zero.
 */

export interface InvoiceDiscount {
  readonly coupon: string;
  /** Basis points (1-10000) or an amount in base units: exactly one of the two. */
  readonly percentOffBps: number | null;
  readonly amountOff: bigint | null;
}

export interface InvoiceUsage {
  readonly quantity: bigint;
  readonly unitAmount: bigint;
  readonly unit: string;
}

export interface InvoiceInput {
  readonly productName: string;
  readonly amount: bigint;
  readonly discount: InvoiceDiscount | null;
  readonly usage: InvoiceUsage | null;
}

export interface InvoiceLine {
  readonly kind: "price" | "usage" | "discount";
  readonly description: string;
  readonly quantity: number | string;
  /** Base units, as an integer string; negative for a discount. */
  readonly amount: string;
}

export interface InvoiceTotals {
  readonly lines: readonly InvoiceLine[];
  readonly subtotal: bigint;
  readonly discount: bigint;
  readonly total: bigint;
}

export const discountOf = (discount: InvoiceDiscount, subtotal: bigint): bigint => {
  if (discount.percentOffBps !== null) {
    const off = (subtotal * BigInt(discount.percentOffBps) + 5_000n) / 10_000n;
    return off > subtotal ? subtotal : off;
  }
  const off = discount.amountOff ?? 0n;
  return off > subtotal ? subtotal : off;
};

export const computeInvoice = (input: InvoiceInput): InvoiceTotals => {
  const lines: InvoiceLine[] = [];
  let subtotal = 0n;
  if (input.amount > 0n) {
    lines.push({
      kind: "price",
      description: input.productName,
      quantity: 1,
      amount: input.amount.toString(),
    });
    subtotal += input.amount;
  }
  if (input.usage && input.usage.quantity > 0n) {
    const amount = input.usage.quantity * input.usage.unitAmount;
    lines.push({
      kind: "usage",
      description: `${input.productName}: ${input.usage.quantity} ${input.usage.unit} used last period`,
      quantity: input.usage.quantity.toString(),
      amount: amount.toString(),
    });
    subtotal += amount;
  }
  const discount = input.discount ? discountOf(input.discount, subtotal) : 0n;
  if (input.discount && discount > 0n)
    lines.push({
      kind: "discount",
      description: `Coupon ${input.discount.coupon}`,
      quantity: 1,
      amount: (-discount).toString(),
    });
  return { lines, subtotal, discount, total: subtotal - discount };
};

/** Whether period `period` falls in the discount's months: periods [start, end). */
export const discountApplies = (
  period: number,
  window: { readonly start: number | null; readonly end: number | null },
): boolean => window.start !== null && window.end !== null && period >= window.start && period < window.end;
