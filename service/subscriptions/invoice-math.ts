/**
 * What a subscription's invoice for one period contains, as a pure function of the price, the
 * discount in force that period, the usage billed with it, the proration lines of plan changes made
 * since the last invoice and the subscription's credit. Money is bigint base units throughout.
 *
 * - The price's amount is billed in advance for the period; usage is billed in arrears, with the next
 *   period's invoice (as Stripe bills metered prices), each record at the price it was recorded under.
 * - A discount applies to the price and usage lines. Percentages are rounded to the nearest base unit,
 *   halves in the customer's favour; an amount off never takes those lines below zero. Proration lines
 *   were valued after the discount of the period they prorate (proration.ts), so none applies to them.
 * - The total is never negative: what the lines leave below zero becomes credit (a `credit` line carries
 *   it, so the lines always sum to the total), and credit is taken off the next totals above zero
 *   (Stripe's customer balance, kept per subscription).
 */

export interface InvoiceDiscount {
  readonly coupon: string;
  /** Basis points (1-10000) or an amount in base units: exactly one of the two. */
  readonly percentOffBps: number | null;
  readonly amountOff: bigint | null;
}

export interface InvoiceUsage {
  readonly productName: string;
  readonly quantity: bigint;
  readonly unitAmount: bigint;
  readonly unit: string;
}

/** A proration of a plan change, billed with the next invoice: negative for unused time credited. */
export interface ProrationLine {
  readonly description: string;
  readonly amount: bigint;
}

export interface InvoiceInput {
  readonly productName: string;
  readonly amount: bigint;
  readonly discount: InvoiceDiscount | null;
  /** Billable usage of the period before, one entry per price it was recorded under. */
  readonly usage: ReadonlyArray<InvoiceUsage>;
  readonly prorations?: ReadonlyArray<ProrationLine>;
  /** The subscription's credit before this invoice. */
  readonly credit?: bigint;
}

export const INVOICE_LINE_KINDS = ["price", "usage", "discount", "proration", "credit"] as const;

export interface InvoiceLine {
  readonly kind: (typeof INVOICE_LINE_KINDS)[number];
  readonly description: string;
  readonly quantity: number | string;
  /** Base units, as an integer string; negative for a discount, a credit or unused time. */
  readonly amount: string;
}

export interface InvoiceTotals {
  readonly lines: readonly InvoiceLine[];
  /** Price, usage and proration lines (negative when credits outweigh the rest). */
  readonly subtotal: bigint;
  readonly discount: bigint;
  /** The subscription's credit before the invoice, what it took of it, and what is left after it. */
  readonly startingCredit: bigint;
  readonly creditApplied: bigint;
  readonly endingCredit: bigint;
  /** What is charged: never negative. */
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
  let discountable = 0n;
  if (input.amount > 0n) {
    lines.push({
      kind: "price",
      description: input.productName,
      quantity: 1,
      amount: input.amount.toString(),
    });
    discountable += input.amount;
  }
  for (const usage of input.usage) {
    if (usage.quantity <= 0n) continue;
    const amount = usage.quantity * usage.unitAmount;
    lines.push({
      kind: "usage",
      description: `${usage.productName}: ${usage.quantity} ${usage.unit} used last period`,
      quantity: usage.quantity.toString(),
      amount: amount.toString(),
    });
    discountable += amount;
  }
  const discount = input.discount ? discountOf(input.discount, discountable) : 0n;
  if (input.discount && discount > 0n)
    lines.push({
      kind: "discount",
      description: `Coupon ${input.discount.coupon}`,
      quantity: 1,
      amount: (-discount).toString(),
    });
  let prorated = 0n;
  for (const proration of input.prorations ?? []) {
    lines.push({
      kind: "proration",
      description: proration.description,
      quantity: 1,
      amount: proration.amount.toString(),
    });
    prorated += proration.amount;
  }
  const startingCredit = input.credit ?? 0n;
  const due = discountable - discount + prorated;
  const creditApplied = due > 0n ? (startingCredit < due ? startingCredit : due) : 0n;
  if (creditApplied > 0n)
    lines.push({
      kind: "credit",
      description: "Credit from earlier changes",
      quantity: 1,
      amount: (-creditApplied).toString(),
    });
  // Below zero: the rest is kept as credit, and the line that says so brings the lines to the total.
  if (due < 0n)
    lines.push({
      kind: "credit",
      description: "Credit carried to the next invoices",
      quantity: 1,
      amount: (-due).toString(),
    });
  return {
    lines,
    subtotal: discountable + prorated,
    discount,
    startingCredit,
    creditApplied,
    endingCredit: startingCredit - creditApplied + (due < 0n ? -due : 0n),
    total: due > 0n ? due - creditApplied : 0n,
  };
};

/** Whether period `period` falls in the discount's months: periods [start, end). */
export const discountApplies = (
  period: number,
  window: { readonly start: number | null; readonly end: number | null },
): boolean => window.start !== null && window.end !== null && period >= window.start && period < window.end;
