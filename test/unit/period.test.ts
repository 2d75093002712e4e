import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  civilFromDays,
  daysFromCivil,
  daysInMonth,
  periodIndexAt,
  periodStart,
} from "../../src/ledger/period.ts";

const utc = (iso: string) => Date.parse(iso) / 1000;
const YEAR_9999 = utc("9999-12-31T23:59:59Z");
const anchor = fc.integer({ min: 0, max: utc("2400-01-01T00:00:00Z") });

describe("calendar-month periods", () => {
  it("agree with the JavaScript calendar on dates", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: Math.floor(YEAR_9999 / 86_400) }), (days) => {
        const date = new Date(days * 86_400_000);
        expect(civilFromDays(days)).toEqual({
          year: date.getUTCFullYear(),
          month: date.getUTCMonth() + 1,
          day: date.getUTCDate(),
        });
        expect(daysFromCivil(date.getUTCFullYear(), date.getUTCMonth() + 1, date.getUTCDate())).toBe(days);
      }),
    );
  });

  it("bill on the anchor's day, clamped to the month's last day, at the anchor's time", () => {
    const jan31 = utc("2023-01-31T10:00:00Z");
    expect([0, 1, 2, 3, 13].map((k) => new Date(periodStart(jan31, k) * 1000).toISOString())).toEqual([
      "2023-01-31T10:00:00.000Z",
      "2023-02-28T10:00:00.000Z",
      "2023-03-31T10:00:00.000Z",
      "2023-04-30T10:00:00.000Z",
      "2024-02-29T10:00:00.000Z",
    ]);
    const dec15 = utc("2024-12-15T00:00:00Z");
    expect(new Date(periodStart(dec15, 1) * 1000).toISOString()).toBe("2025-01-15T00:00:00.000Z");
    expect(periodIndexAt(dec15, dec15 - 1)).toBeUndefined();
    expect(periodIndexAt(dec15, utc("2025-01-14T23:59:59Z"))).toBe(0);
    expect(periodIndexAt(dec15, utc("2025-01-15T00:00:00Z"))).toBe(1);
  });

  it("place every time in exactly one period: start(k) <= t < start(k+1)", () => {
    fc.assert(
      fc.property(anchor, fc.integer({ min: 0, max: 60 * 366 * 86_400 }), (a, offset) => {
        const t = a + offset;
        const k = periodIndexAt(a, t);
        if (k === undefined) throw new Error("no period");
        expect(periodStart(a, k)).toBeLessThanOrEqual(t);
        expect(periodStart(a, k + 1)).toBeGreaterThan(t);
      }),
    );
  });

  it("start a period in every calendar month, between 28 and 31 days apart", () => {
    fc.assert(
      fc.property(anchor, fc.integer({ min: 0, max: 1200 }), (a, k) => {
        const gap = periodStart(a, k + 1) - periodStart(a, k);
        expect(gap % 86_400).toBe(0);
        expect(gap / 86_400).toBeGreaterThanOrEqual(28);
        expect(gap / 86_400).toBeLessThanOrEqual(31);
        const start = new Date(periodStart(a, k) * 1000);
        const first = new Date(a * 1000);
        const months =
          (start.getUTCFullYear() - first.getUTCFullYear()) * 12 + start.getUTCMonth() - first.getUTCMonth();
        expect(months).toBe(k);
        expect(start.getUTCDate()).toBe(
          Math.min(first.getUTCDate(), daysInMonth(start.getUTCFullYear(), start.getUTCMonth() + 1)),
        );
      }),
    );
  });
});
