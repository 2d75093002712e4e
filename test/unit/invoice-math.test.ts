import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { nextRetryAt, RETRY_DAYS } from "../../service/subscriptions/dunning.ts";
import { computeInvoice, discountApplies, discountOf } from "../../service/subscriptions/invoice-math.ts";
import { periodStart } from "../../src/ledger/period.ts";

const units = fc.bigInt({ min: 0n, max: 10n ** 15n });
const discount = fc.oneof(
  fc.record({
    coupon: fc.constant("cpn_x"),
    percentOffBps: fc.integer({ min: 1, max: 10_000 }),
    amountOff: fc.constant(null),
  }),
  fc.record({ coupon: fc.constant("cpn_x"), percentOffBps: fc.constant(null), amountOff: units }),
);
const usage = fc.record({
  productName: fc.constant("P"),
  quantity: fc.bigInt({ min: 0n, max: 10n ** 6n }),
  unitAmount: fc.bigInt({ min: 1n, max: 10n ** 6n }),
  unit: fc.constant("call"),
});

describe("invoice math", () => {
  it("lines sum to the total, the discount never exceeds the subtotal, and the total is never negative", () => {
    fc.assert(
      fc.property(
        units,
        fc.option(discount, { nil: null }),
        fc.option(usage, { nil: null }),
        (amount, d, u) => {
          const invoice = computeInvoice({ productName: "P", amount, discount: d, usage: u ? [u] : [] });
          const sum = invoice.lines.reduce((total, line) => total + BigInt(line.amount), 0n);
          expect(sum).toBe(invoice.total);
          expect(invoice.discount).toBeGreaterThanOrEqual(0n);
          expect(invoice.discount).toBeLessThanOrEqual(invoice.subtotal);
          expect(invoice.total).toBe(invoice.subtotal - invoice.discount);
          expect(invoice.subtotal).toBe(amount + (u ? u.quantity * u.unitAmount : 0n));
        },
      ),
    );
  });

  it("with prorations and credit: lines sum to the total, never negative, and credit is conserved", () => {
    const proration = fc.record({
      description: fc.constant("p"),
      amount: fc.bigInt({ min: -(10n ** 15n), max: 10n ** 15n }),
    });
    fc.assert(
      fc.property(
        units,
        fc.option(discount, { nil: null }),
        fc.array(proration, { maxLength: 6 }),
        units,
        (amount, d, prorations, credit) => {
          const invoice = computeInvoice({
            productName: "P",
            amount,
            discount: d,
            usage: [],
            prorations,
            credit,
          });
          const sum = invoice.lines.reduce((total, line) => total + BigInt(line.amount), 0n);
          expect(sum).toBe(invoice.total);
          expect(invoice.total).toBeGreaterThanOrEqual(0n);
          expect(invoice.endingCredit).toBeGreaterThanOrEqual(0n);
          // What the lines owe is either charged, or taken from the credit, or added to it: nothing is lost.
          const owed = invoice.subtotal - invoice.discount;
          expect(invoice.total - owed).toBe(invoice.endingCredit - credit);
          expect(invoice.creditApplied).toBeLessThanOrEqual(credit);
          // Credit is only taken when something is owed, and the total is only above zero once it is used up.
          if (invoice.total > 0n) expect(invoice.endingCredit).toBe(0n);
        },
      ),
    );
  });

  it("rounds a percentage to the nearest unit, halves to the customer", () => {
    const half = { coupon: "c", percentOffBps: 5_000, amountOff: null };
    expect(discountOf(half, 5n)).toBe(3n);
    expect(discountOf(half, 4n)).toBe(2n);
    expect(discountOf({ coupon: "c", percentOffBps: 3_333, amountOff: null }, 100n)).toBe(33n);
    expect(discountOf({ coupon: "c", percentOffBps: null, amountOff: 7n }, 5n)).toBe(5n);
    fc.assert(
      fc.property(units, fc.integer({ min: 1, max: 10_000 }), (subtotal, bps) => {
        const off = discountOf({ coupon: "c", percentOffBps: bps, amountOff: null }, subtotal);
        // |off - subtotal × bps / 10000| ≤ 1/2 unit
        const exact = subtotal * BigInt(bps);
        const diff = off * 10_000n - exact;
        expect(diff <= 5_000n && diff > -5_000n).toBe(true);
      }),
    );
  });

  it("applies a discount to exactly duration_in_months periods", () => {
    fc.assert(
      fc.property(fc.nat(200), fc.integer({ min: 1, max: 120 }), (start, months) => {
        const window = { start, end: start + months };
        let applied = 0;
        for (let p = 0; p < start + months + 10; p++) if (discountApplies(p, window)) applied++;
        expect(applied).toBe(months);
      }),
    );
    expect(discountApplies(0, { start: null, end: null })).toBe(false);
  });
});

describe("dunning schedule", () => {
  it("retries 1, 3, 5 and 7 days after the first failure, each inside the period, then stops", () => {
    const start = Date.UTC(2026, 1, 1) / 1000;
    const end = periodStart(start, 1);
    expect(RETRY_DAYS).toEqual([1, 3, 5, 7]);
    const times = [1, 2, 3, 4, 5].map((failures) =>
      nextRetryAt({ firstFailureAt: start, failures, periodEnd: end }),
    );
    expect(times).toEqual([
      start + 86_400,
      start + 3 * 86_400,
      start + 5 * 86_400,
      start + 7 * 86_400,
      undefined,
    ]);
  });

  it("never schedules a retry at or after the period's end, on any anchor (29th, 30th, 31st included)", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: Date.UTC(2024, 0, 1) / 1000, max: Date.UTC(2030, 0, 1) / 1000 }),
        fc.nat(30 * 86_400),
        fc.integer({ min: 1, max: 6 }),
        (anchor, offset, failures) => {
          const end = periodStart(anchor, 1);
          const first = Math.min(anchor + offset, end - 1);
          const at = nextRetryAt({ firstFailureAt: first, failures, periodEnd: end });
          if (at !== undefined) {
            expect(at).toBeLessThan(end);
            expect(at).toBeGreaterThan(first);
          }
          if (failures > RETRY_DAYS.length) expect(at).toBeUndefined();
          // Failing at the period's start leaves room for every retry in the shortest month.
          if (first === anchor && failures <= RETRY_DAYS.length) expect(at).toBeDefined();
        },
      ),
    );
  });
});
