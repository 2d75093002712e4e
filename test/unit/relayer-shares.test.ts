/**
 * The arithmetic of the merchants' shares of the relayer's hourly budget (chains/relayer-shares.ts): a
 * transaction's parts per merchant, the share's limit, which merchants a transaction would take past it,
 * and when a refused part fits again as the hour moves on.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  merchantWeights,
  overShare,
  partOf,
  shareLimit,
  shareRetryAfterSeconds,
} from "../../service/chains/relayer-shares.ts";

const MINUTE = 60_000;
/** A minute stops counting once the window (an hour, counted in whole minutes) has passed its end. */
const countsAt = (minute: Date, at: number) => minute.getTime() + 61 * MINUTE > at;

const merchantIds = fc.array(fc.constantFrom("mer_a", "mer_b", "mer_c", "mer_d"), {
  minLength: 1,
  maxLength: 60,
});

describe("a transaction's merchants and their parts", () => {
  it("counts each merchant's objects once, in first-seen order, and the counts add up to the objects", () => {
    fc.assert(
      fc.property(merchantIds, (ids) => {
        const weights = merchantWeights(ids);
        expect(weights.map((w) => w.merchantId)).toEqual([...new Set(ids)]);
        expect(weights.reduce((sum, w) => sum + w.objects, 0)).toBe(ids.length);
        for (const w of weights) expect(w.objects).toBe(ids.filter((id) => id === w.merchantId).length);
      }),
    );
  });

  it("gives each merchant its objects' fraction of the cost, rounded down: the parts never exceed the cost", () => {
    fc.assert(
      fc.property(merchantIds, fc.bigInt({ min: 0n, max: 10n ** 24n }), (ids, cost) => {
        const weights = merchantWeights(ids);
        const parts = weights.map((w) => partOf(cost, w.objects, ids.length));
        const sum = parts.reduce((a, b) => a + b, 0n);
        expect(sum).toBeLessThanOrEqual(cost);
        // Rounding loses less than a wei per merchant.
        expect(cost - sum).toBeLessThan(BigInt(weights.length));
        for (const [i, w] of weights.entries())
          expect(parts[i]).toBe((cost * BigInt(w.objects)) / BigInt(ids.length));
      }),
    );
    expect(partOf(100n, 1, 3)).toBe(33n);
    expect(partOf(100n, 3, 3)).toBe(100n);
  });

  it("limits a merchant to its share of the budget: never more than the budget, the whole of it at 1", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 10n ** 24n }),
        fc.double({ min: 0.000001, max: 1, noNaN: true }),
        fc.double({ min: 0.000001, max: 1, noNaN: true }),
        (budget, a, b) => {
          expect(shareLimit(budget, a)).toBeLessThanOrEqual(budget);
          expect(shareLimit(budget, 1)).toBe(budget);
          const [low, high] = a <= b ? [a, b] : [b, a];
          expect(shareLimit(budget, low)).toBeLessThanOrEqual(shareLimit(budget, high));
        },
      ),
    );
    expect(shareLimit(10n ** 18n, 0.5)).toBe(5n * 10n ** 17n);
  });
});

/** A merchant's spending per minute within the hour before `now`, minutes distinct and aligned. */
const spendingBefore = (now: number) =>
  fc
    .uniqueArray(fc.integer({ min: 0, max: 60 }), { maxLength: 30 })
    .chain((ago) =>
      fc.tuple(
        fc.constant(ago),
        fc.array(fc.bigInt({ min: 0n, max: 10n ** 15n }), { minLength: ago.length, maxLength: ago.length }),
      ),
    )
    .map(([ago, wei]) =>
      ago.map((minutes, i) => ({
        minute: new Date(Math.floor(now / MINUTE) * MINUTE - minutes * MINUTE),
        wei: wei[i] ?? 0n,
      })),
    );

describe("which merchants a transaction would take past their share", () => {
  it("refuses exactly the merchants whose spending plus their part passes the limit; the others stay within it", () => {
    const now = 1_700_000_000_123;
    fc.assert(
      fc.property(
        merchantIds,
        fc.bigInt({ min: 0n, max: 10n ** 16n }),
        fc.bigInt({ min: 1n, max: 10n ** 16n }),
        fc.dictionary(fc.constantFrom("mer_a", "mer_b", "mer_c", "mer_d"), spendingBefore(now)),
        (ids, cost, limit, spendingOf) => {
          const weights = merchantWeights(ids);
          const spending = Object.entries(spendingOf).flatMap(([merchant_id, minutes]) =>
            minutes.map((m) => ({ merchant_id, ...m })),
          );
          const over = new Set(overShare(weights, spending, cost, limit, now).map((o) => o.merchantId));
          for (const w of weights) {
            const spent = (spendingOf[w.merchantId] ?? []).reduce((sum, m) => sum + m.wei, 0n);
            const part = partOf(cost, w.objects, ids.length);
            expect(over.has(w.merchantId)).toBe(spent + part > limit);
          }
        },
      ),
    );
  });
});

describe("when a refused part fits the share again", () => {
  it("names the first moment the hour has let go of enough spending, not a second earlier", () => {
    const now = 1_700_000_000_123;
    fc.assert(
      fc.property(
        spendingBefore(now),
        fc.bigInt({ min: 0n, max: 10n ** 16n }),
        fc.bigInt({ min: 1n, max: 10n ** 16n }),
        (minutes, part, limit) => {
          const spentAt = (at: number) =>
            minutes.filter((m) => countsAt(m.minute, at)).reduce((sum, m) => sum + m.wei, 0n);
          const retry = shareRetryAfterSeconds(minutes, part, limit, now);
          expect(retry).toBeGreaterThanOrEqual(1);
          if (part > limit) {
            expect(retry).toBe(61 * 60);
            return;
          }
          expect(spentAt(now + retry * 1000) + part).toBeLessThanOrEqual(limit);
          if (retry > 1) expect(spentAt(now + (retry - 1) * 1000) + part).toBeGreaterThan(limit);
        },
      ),
    );
  });

  it("waits for the oldest minutes in turn", () => {
    const now = Date.UTC(2026, 0, 1, 12, 0, 30);
    const at = (minutesAgo: number) => new Date(Date.UTC(2026, 0, 1, 12, 0) - minutesAgo * MINUTE);
    const minutes = [
      { minute: at(59), wei: 40n },
      { minute: at(30), wei: 40n },
      { minute: at(0), wei: 20n },
    ];
    // 100 spent of 100: a part of 30 needs the minute of 59 minutes ago gone (2 minutes on), a part of
    // 70 the one of 30 minutes ago as well.
    expect(shareRetryAfterSeconds(minutes, 30n, 100n, now)).toBe(90);
    expect(shareRetryAfterSeconds(minutes, 70n, 100n, now)).toBe(30 * 60 + 30);
    expect(shareRetryAfterSeconds(minutes, 0n, 100n, now)).toBe(1);
    expect(shareRetryAfterSeconds(minutes, 101n, 100n, now)).toBe(3660);
  });
});
