import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { computeInvoice } from "../../service/subscriptions/invoice-math.ts";
import {
  decideChange,
  discountedAmount,
  pendingExpiresAt,
  prorate,
  prorationLines,
} from "../../service/subscriptions/proration.ts";
import { periodIndexAt, periodStart } from "../../src/ledger/period.ts";

const amount = fc.bigInt({ min: 0n, max: 10n ** 12n });
/** A period of a real calendar month (28–31 days) starting on a random day. */
const period = fc
  .integer({ min: Date.UTC(2025, 0, 1) / 1000, max: Date.UTC(2030, 0, 1) / 1000 })
  .map((anchor) => ({ start: anchor, end: periodStart(anchor, 1) }));

describe("proration", () => {
  it("each line is within one unit of its exact value and the net never exceeds it (the customer's side)", () => {
    fc.assert(
      fc.property(
        period,
        fc.double({ min: 0, max: 1, noNaN: true }),
        amount,
        amount,
        (p, f, oldAmount, newAmount) => {
          const at = p.start + Math.floor((p.end - p.start) * f);
          const { credit, charge } = prorate({
            periodStart: p.start,
            periodEnd: p.end,
            at,
            oldAmount,
            newAmount,
          });
          const length = BigInt(p.end - p.start);
          const left = BigInt(p.end - at);
          // Scaled by the period's length: exact values are amount × left / length.
          const exactCharge = newAmount * left;
          const exactCredit = oldAmount * left;
          const exactNet = exactCharge - exactCredit;
          expect(credit).toBeGreaterThanOrEqual(0n);
          expect(charge).toBeGreaterThanOrEqual(0n);
          expect(charge * length <= exactCharge && exactCharge - charge * length < length).toBe(true);
          const creditError = credit * length - exactCredit;
          expect(creditError > -length && creditError < length).toBe(true);
          const netError = exactNet - (charge - credit) * length;
          expect(netError >= 0n && netError < length).toBe(true);
        },
      ),
    );
  });

  it("changes at the period's start or end: the whole difference, or nothing", () => {
    expect(prorate({ periodStart: 0, periodEnd: 100, at: 0, oldAmount: 30n, newAmount: 50n })).toEqual({
      credit: 30n,
      charge: 50n,
    });
    expect(prorate({ periodStart: 0, periodEnd: 100, at: 100, oldAmount: 30n, newAmount: 50n })).toEqual({
      credit: 0n,
      charge: 0n,
    });
    // A third of the period left on 10 → 20: net 10/3 = 3.33… rounds down to 3; charge 6, credit 3.
    expect(prorate({ periodStart: 0, periodEnd: 90, at: 60, oldAmount: 10n, newAmount: 20n })).toEqual({
      credit: 3n,
      charge: 6n,
    });
    // A downgrade 20 → 10: net −3.33… rounds down to −4 (the customer is credited the fraction).
    expect(prorate({ periodStart: 0, periodEnd: 90, at: 60, oldAmount: 20n, newAmount: 10n })).toEqual({
      credit: 7n,
      charge: 3n,
    });
  });

  it("over any sequence of changes in a period, paid plus prorations is the time-weighted price, ± one unit per change", () => {
    fc.assert(
      fc.property(
        period,
        amount,
        fc.array(fc.record({ f: fc.double({ min: 0, max: 1, noNaN: true }), amount }), { maxLength: 8 }),
        (p, first, changes) => {
          const length = p.end - p.start;
          const steps = changes
            .map((c) => ({ at: p.start + Math.floor(length * c.f), amount: c.amount }))
            .sort((a, b) => a.at - b.at);
          // What the invoice after the period gets: each change's lines, priced from the price then in force.
          let inForce = first;
          let prorations = 0n;
          for (const step of steps) {
            for (const line of prorationLines({
              periodStart: p.start,
              periodEnd: p.end,
              at: step.at,
              oldAmount: inForce,
              newAmount: step.amount,
              oldName: "old",
              newName: "new",
            }))
              prorations += line.amount;
            inForce = step.amount;
          }
          // Time-weighted, scaled by the length: each price for the time it was in force.
          let weighted = 0n;
          let from = p.start;
          let price = first;
          for (const step of steps) {
            weighted += price * BigInt(step.at - from);
            from = step.at;
            price = step.amount;
          }
          weighted += price * BigInt(p.end - from);
          const paid = (first + prorations) * BigInt(length);
          const error = weighted - paid;
          expect(error >= 0n).toBe(true);
          expect(error < BigInt(length) * BigInt(Math.max(steps.length, 1))).toBe(true);
        },
      ),
    );
  });

  it("takes the period's percentage discount off both prices", () => {
    expect(discountedAmount(100n, null)).toBe(100n);
    expect(discountedAmount(100n, 2_500)).toBe(75n);
    fc.assert(
      fc.property(amount, fc.integer({ min: 1, max: 10_000 }), (a, bps) => {
        const d = discountedAmount(a, bps);
        expect(d >= 0n && d <= a).toBe(true);
      }),
    );
  });
});

describe("changes against the cap", () => {
  it("no invoice ever exceeds the cap in force: a change applies only when its invoices fit", () => {
    // A model of one subscription: changes (applied, or pending until the cap allows them), the customer
    // signing a higher cap, and boundaries that bill. Part B's caps only rise (a re-signature).
    // Small amounts, so that credits, prices and caps meet often.
    const small = fc.bigInt({ min: 0n, max: 1_000n });
    const op = fc.oneof(
      fc.record({
        kind: fc.constant("change" as const),
        amount: small,
        f: fc.double({ min: 0, max: 1, noNaN: true }),
      }),
      fc.record({ kind: fc.constant("raise" as const), by: small }),
      fc.record({ kind: fc.constant("boundary" as const) }),
    );
    fc.assert(
      fc.property(small, small, fc.array(op, { maxLength: 30 }), (start, extra, ops) => {
        const length = 30 * 86_400;
        let cap = start + extra;
        let price = start;
        let prorations: Array<{ description: string; amount: bigint }> = [];
        let credit = 0n;
        let pending: bigint | undefined;
        let periodStartAt = 0;
        let now = 0;
        const invoice = (p: bigint, lines: typeof prorations, c: bigint) =>
          computeInvoice({
            productName: "P",
            amount: p,
            discount: null,
            usage: [],
            prorations: lines,
            credit: c,
          });
        const tryApply = (target: bigint) => {
          const lines = [
            ...prorations,
            ...prorationLines({
              periodStart: periodStartAt,
              periodEnd: periodStartAt + length,
              at: now,
              oldAmount: price,
              newAmount: target,
              oldName: "a",
              newName: "b",
            }),
          ];
          const next = invoice(target, lines, credit).total;
          const recurring = invoice(target, [], 0n).total;
          if (decideChange({ next, recurring }, cap, "pending_if_incomplete") !== "apply") return false;
          price = target;
          prorations = lines;
          return true;
        };
        for (const o of ops) {
          if (o.kind === "change") {
            now = Math.max(now, periodStartAt + Math.floor(length * o.f));
            pending = tryApply(o.amount) ? undefined : o.amount;
          } else if (o.kind === "raise") {
            cap += o.by;
            if (pending !== undefined && tryApply(pending)) pending = undefined;
          } else {
            const billed = invoice(price, prorations, credit);
            expect(billed.total).toBeLessThanOrEqual(cap);
            credit = billed.endingCredit;
            prorations = [];
            periodStartAt += length;
            now = periodStartAt;
          }
        }
      }),
      {
        numRuns: 2_000,
        // A downgrade's credit paying for an upgrade above the cap: the invoice after the credit is used up would not fit.
        examples: [
          [
            1_000n,
            0n,
            [
              { kind: "change", amount: 0n, f: 0 },
              { kind: "boundary" },
              { kind: "change", amount: 1_500n, f: 1 },
              { kind: "boundary" },
              { kind: "boundary" },
            ],
          ],
        ],
      },
    );
  });

  it("decides apply, pending or refuse", () => {
    expect(decideChange({ next: 10n, recurring: 10n }, 10n, "pending_if_incomplete")).toBe("apply");
    expect(decideChange({ next: 11n, recurring: 10n }, 10n, "pending_if_incomplete")).toBe("pending");
    expect(decideChange({ next: 11n, recurring: 10n }, 10n, "error_if_incomplete")).toBe("refuse");
    // Credit would pay for the next invoice, but the price itself is above the cap: not applied.
    expect(decideChange({ next: 5n, recurring: 11n }, 10n, "pending_if_incomplete")).toBe("pending");
  });

  it("a pending update outlives one boundary and expires at the next", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: Date.UTC(2025, 0, 1) / 1000, max: Date.UTC(2030, 0, 1) / 1000 }),
        fc.integer({ min: 0, max: 40 }),
        fc.double({ min: 0, max: 1, noNaN: true }),
        (anchor, index, f) => {
          const start = periodStart(anchor, index);
          const end = periodStart(anchor, index + 1);
          const now = start + Math.floor((end - start - 1) * f);
          // Billed up to this period: the next boundary is its end; the update expires a period later.
          expect(pendingExpiresAt(anchor, end, now)).toBe(periodStart(anchor, index + 2));
          // The boundary already due and not billed yet: it is billed with the old price, then one more.
          expect(pendingExpiresAt(anchor, start, now)).toBe(end);
          expect(periodIndexAt(anchor, now)).toBe(index);
        },
      ),
    );
  });
});
