import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { canonicalJson } from "../../service/idempotency/canonical-json.ts";
import { requestFingerprint } from "../../service/idempotency/idempotency.ts";

const shuffleKeys = (value: unknown, seed: number): unknown => {
  if (Array.isArray(value)) return value.map((v) => shuffleKeys(v, seed));
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>);
    const rotated = entries.map((_, i) => entries[(i + seed) % entries.length] as [string, unknown]);
    return Object.fromEntries(rotated.map(([k, v]) => [k, shuffleKeys(v, seed)]));
  }
  return value;
};

describe("request fingerprint for Idempotency-Key", () => {
  it("ignores key order and whitespace", () => {
    fc.assert(
      fc.property(fc.jsonValue(), fc.nat(), (value, seed) => {
        expect(canonicalJson(shuffleKeys(value, seed))).toBe(canonicalJson(value));
      }),
    );
  });

  it("round-trips: the canonical text parses back to what JSON itself gives (JSON has no -0)", () => {
    fc.assert(
      fc.property(fc.jsonValue(), (value) => {
        expect(JSON.parse(canonicalJson(value))).toEqual(JSON.parse(JSON.stringify(value)));
      }),
    );
  });

  it("differs when the body, path or method differs", () => {
    const base = { key: "k", method: "POST", path: "/v1/merchant/chains", body: { chain: 1 } };
    const fp = requestFingerprint(base);
    expect(requestFingerprint({ ...base, body: { chain: 2 } }).equals(fp)).toBe(false);
    expect(requestFingerprint({ ...base, path: "/v1/mandates" }).equals(fp)).toBe(false);
    expect(requestFingerprint({ ...base, key: "other" }).equals(fp)).toBe(true);
  });
});
