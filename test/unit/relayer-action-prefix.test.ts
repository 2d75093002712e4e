import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { prefixEnd } from "../../service/chains/relayer-store.ts";

/** Postgres' text_pattern_ops order: the UTF-8 bytes. */
const compare = (a: string, b: string) => Buffer.compare(Buffer.from(a, "utf8"), Buffer.from(b, "utf8"));
const text = fc.string({ unit: "binary" });

describe("the upper bound of an action prefix (relayer_transactions_action range)", () => {
  it("is above every string that starts with the prefix", () => {
    fc.assert(
      fc.property(text, text, (prefix, rest) => {
        const end = prefixEnd(prefix);
        fc.pre(end !== undefined);
        expect(compare(prefix, prefix + rest)).toBeLessThanOrEqual(0);
        expect(compare(prefix + rest, end as string)).toBeLessThan(0);
      }),
      { numRuns: 2_000 },
    );
  });

  it("leaves out nothing but strings that start with the prefix: [prefix, end) holds only those", () => {
    fc.assert(
      fc.property(text, text, (prefix, other) => {
        const end = prefixEnd(prefix);
        fc.pre(end !== undefined && !other.startsWith(prefix));
        const inRange = compare(prefix, other) <= 0 && compare(other, end as string) < 0;
        expect(inRange).toBe(false);
      }),
      { numRuns: 2_000 },
    );
  });

  it("bounds the authorization limit's prefix by its next character, and none exists for the empty prefix", () => {
    expect(prefixEnd("authorize:31337:0xab:")).toBe("authorize:31337:0xab;");
    expect(prefixEnd("")).toBeUndefined();
    expect(prefixEnd("a\u{10FFFF}")).toBeUndefined();
    expect(prefixEnd("a\u{1F600}")).toBe("a\u{1F601}");
  });
});
