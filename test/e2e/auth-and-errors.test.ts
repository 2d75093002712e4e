import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { api, cli, expectErrorShape, newMerchantWithKey, query, stack } from "./helpers.ts";

describe("authentication", () => {
  it("refuses a missing, malformed, unknown or revoked key with 401 in the error shape", async () => {
    const { merchantId, key } = await newMerchantWithKey();
    const revoked = (await cli("keys", "create", "--merchant", merchantId, "--mode", "test")).split("\t");
    await cli("keys", "revoke", String(revoked[0]));
    const cases: Array<[string, Record<string, string> | null, string]> = [
      ["missing", null, "api_key_missing"],
      ["not bearer", { authorization: `Basic ${key}` }, "api_key_malformed"],
      ["not a key", { authorization: "Bearer hello" }, "api_key_malformed"],
      ["unknown", { authorization: `Bearer sk_test_${"a".repeat(43)}` }, "api_key_invalid"],
      ["revoked", { authorization: `Bearer ${revoked[1]}` }, "api_key_invalid"],
    ];
    for (const [name, headers, code] of cases) {
      const response = await api("/v1/chains", { key: null, headers: headers ?? {} });
      expect(response.status, name).toBe(401);
      const error = expectErrorShape(response.json);
      expect(error.type).toBe("authentication_error");
      expect(error.code, name).toBe(code);
    }
    expect((await api("/v1/chains", { key })).status).toBe(200);
  });

  it("stores keys hashed, never in clear", async () => {
    const { key } = await newMerchantWithKey();
    const rows = await query<Record<string, unknown>>("SELECT * FROM billing.api_keys");
    const dump = JSON.stringify(rows, (_, v) => (typeof v === "bigint" ? String(v) : v));
    expect(dump).not.toContain(key);
    expect(dump).not.toContain(key.slice(8, 40));
  });

  it("gives every response a distinct Request-Id", async () => {
    const a = await api("/v1/chains");
    const b = await api("/v1/nope");
    expect(a.headers.get("request-id")).toMatch(/^req_/);
    expect(b.headers.get("request-id")).toMatch(/^req_/);
    expect(a.headers.get("request-id")).not.toBe(b.headers.get("request-id"));
  });
});

describe("protocol errors, all in one shape", () => {
  it("404 for an unknown route, 405 with Allow for a wrong method", async () => {
    const notFound = await api("/v1/unknown_things");
    expect(notFound.status).toBe(404);
    expect(expectErrorShape(notFound.json).code).toBe("route_not_found");
    const wrongMethod = await api("/v1/chains", { method: "DELETE" });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get("allow")).toContain("GET");
    expect(expectErrorShape(wrongMethod.json).code).toBe("method_not_allowed");
  });

  it("400 for malformed JSON, 415 for another content type, 413 for an oversized body", async () => {
    const malformed = await api("/v1/merchant/chains", {
      rawBody: "{not json",
      headers: { "content-type": "application/json" },
    });
    expect(malformed.status).toBe(400);
    expect(expectErrorShape(malformed.json).code).toBe("invalid_json");
    const form = await api("/v1/merchant/chains", {
      rawBody: "chain=31337",
      headers: { "content-type": "application/x-www-form-urlencoded" },
    });
    expect(form.status).toBe(415);
    expect(expectErrorShape(form.json).code).toBe("unsupported_media_type");
    const big = await api("/v1/merchant/chains", {
      rawBody: JSON.stringify({ chain: 31337, payout_address: "x".repeat(70_000) }),
      headers: { "content-type": "application/json" },
    });
    expect(big.status).toBe(413);
    expect(expectErrorShape(big.json).code).toBe("body_too_large");
    const array = await api("/v1/merchant/chains", { body: [1, 2] });
    expect(array.status).toBe(400);
    expect(expectErrorShape(array.json).code).toBe("invalid_body");
  });

  it("never answers 500 nor changes state for arbitrary bodies (fuzz)", async () => {
    const { merchantId, key } = await newMerchantWithKey();
    const before = await query(
      "SELECT count(*)::int AS n FROM billing.merchant_chains WHERE merchant_id = $1",
      [merchantId],
    );
    const value = fc.oneof(
      fc.string(),
      fc.integer(),
      fc.double(),
      fc.boolean(),
      fc.constant(null),
      fc.array(fc.string()),
    );
    const body = fc.oneof(
      fc.dictionary(fc.constantFrom("chain", "payout_address", "tokens", "extra", "__proto__"), value),
      fc.jsonValue(),
      fc.string().map((s) => ({ raw: s })),
    );
    await fc.assert(
      fc.asyncProperty(body, async (candidate) => {
        const isRaw =
          typeof candidate === "object" &&
          candidate !== null &&
          "raw" in candidate &&
          Object.keys(candidate).length === 1;
        const response = isRaw
          ? await api("/v1/merchant/chains", {
              key,
              rawBody: String((candidate as { raw: string }).raw),
              headers: { "content-type": "application/json" },
            })
          : await api("/v1/merchant/chains", { key, body: candidate });
        expect(response.status).toBeGreaterThanOrEqual(400);
        expect(response.status).toBeLessThan(500);
        expectErrorShape(response.json);
      }),
      { numRuns: Number(process.env.FUZZ_RUNS ?? 150) },
    );
    const after = await query(
      "SELECT count(*)::int AS n FROM billing.merchant_chains WHERE merchant_id = $1",
      [merchantId],
    );
    expect(after).toEqual(before);
  });

  it("reports readiness of API, indexer and workers", async () => {
    const response = await fetch(`${stack().apiUrl}/ready`);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      ready: true,
      checks: { database: "ready", indexer: "ready", workers: "ready" },
    });
  });
});
