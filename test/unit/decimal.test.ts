import { Result } from "effect";
import fc from "fast-check";
import { formatUnits, parseUnits } from "viem";
import { describe, expect, it } from "vitest";
import { formatDecimal, MAX_CAP_UNITS, parseDecimal } from "../../service/money/decimal.ts";

const units = fc.bigInt({ min: 1n, max: MAX_CAP_UNITS });
const decimals = fc.integer({ min: 0, max: 18 });

describe("decimal amounts", () => {
  it("format zero and negative amounts as viem does", () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -MAX_CAP_UNITS, max: 0n }), decimals, (u, d) => {
        expect(formatDecimal(u, d)).toBe(formatUnits(u, d));
      }),
    );
  });

  it("round-trip exactly: format then parse gives the same base units, and agrees with viem", () => {
    fc.assert(
      fc.property(units, decimals, (u, d) => {
        const text = formatDecimal(u, d);
        expect(text).toBe(formatUnits(u, d));
        expect(parseDecimal(text, d, MAX_CAP_UNITS)).toEqual(Result.succeed(u));
        expect(parseUnits(text, d)).toBe(u);
      }),
    );
  });

  it("accept trailing zeros within the token's decimals", () => {
    expect(parseDecimal("12.50", 6, MAX_CAP_UNITS)).toEqual(Result.succeed(12_500_000n));
    expect(parseDecimal("007", 6, MAX_CAP_UNITS)).toEqual(Result.succeed(7_000_000n));
  });

  it.each([
    ["abc", "not_a_decimal"],
    ["-1", "not_a_decimal"],
    ["+1", "not_a_decimal"],
    ["1e5", "not_a_decimal"],
    [" 1", "not_a_decimal"],
    ["1 ", "not_a_decimal"],
    ["1.", "not_a_decimal"],
    [".5", "not_a_decimal"],
    ["1,5", "not_a_decimal"],
    ["0x10", "not_a_decimal"],
    ["", "not_a_decimal"],
    ["Infinity", "not_a_decimal"],
    ["0", "not_positive"],
    ["0.000000", "not_positive"],
    ["1.0000001", "too_many_decimals"],
    ["79228162514264337593543.950336", "too_large"],
  ])("refuse %j (%s)", (text, code) => {
    const result = parseDecimal(text, 6, MAX_CAP_UNITS);
    expect(Result.isFailure(result) && result.failure.code).toBe(code);
  });

  it("refuse any string that is not plain digits with an optional point", () => {
    fc.assert(
      fc.property(fc.string(), (text) => {
        fc.pre(!/^\d+(\.\d+)?$/.test(text));
        expect(Result.isFailure(parseDecimal(text, 6, MAX_CAP_UNITS))).toBe(true);
      }),
    );
  });
});
