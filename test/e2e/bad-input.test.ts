/**
 * Bad input on the mandate and charge endpoints: a table of malformed values for every field, then
 * fast-check fuzzing of request bodies. Always a 4xx in the one error shape, never a 500, and nothing
 * changes (no mandate, no charge, no event).
 */
import fc from "fast-check";
import { beforeAll, describe, expect, it } from "vitest";
import { anyValue, assertCreatedOrNothingChanged, bodiesAround, FUZZ_RUNS } from "./fuzzed-bodies.ts";
import { api, expectErrorShape, merchantOnTestChain, query } from "./helpers.ts";

let key: string;
let merchantId: string;
let otherKey: string;
let mandateId: string;
let otherMandateId: string;

const valid = { cap_decimal: "25", period: "month", customer: "cus_1", reference: "ref_1" };

const counts = async () =>
  (
    await query<{ mandates: number; charges: number; events: number }>(
      `SELECT (SELECT count(*)::int FROM billing.mandates WHERE merchant_id = $1) AS mandates,
              (SELECT count(*)::int FROM billing.charges WHERE merchant_id = $1) AS charges,
              (SELECT count(*)::int FROM billing.events WHERE merchant_id = $1) AS events`,
      [merchantId],
    )
  )[0];

beforeAll(async () => {
  ({ key, merchantId } = await merchantOnTestChain());
  mandateId = (await api("/v1/mandates", { key, body: valid })).json.id;
  otherKey = (await merchantOnTestChain()).key;
  otherMandateId = (await api("/v1/mandates", { key: otherKey, body: valid })).json.id;
});

const without = (field: keyof typeof valid) => {
  const { [field]: _, ...rest } = valid;
  return rest;
};

const mandateCases: Array<[string, unknown, string, string | null]> = [
  ["cap_decimal abc", { ...valid, cap_decimal: "abc" }, "parameter_invalid", "cap_decimal"],
  ["cap_decimal -1", { ...valid, cap_decimal: "-1" }, "parameter_invalid", "cap_decimal"],
  ["cap_decimal 0", { ...valid, cap_decimal: "0" }, "parameter_invalid", "cap_decimal"],
  ["cap_decimal 1e5", { ...valid, cap_decimal: "1e5" }, "parameter_invalid", "cap_decimal"],
  ["cap_decimal ' 1'", { ...valid, cap_decimal: " 1" }, "parameter_invalid", "cap_decimal"],
  ["cap_decimal 1.", { ...valid, cap_decimal: "1." }, "parameter_invalid", "cap_decimal"],
  ["cap_decimal 7 decimals", { ...valid, cap_decimal: "1.0000001" }, "parameter_invalid", "cap_decimal"],
  [
    "cap_decimal above the token's max",
    { ...valid, cap_decimal: "79228162514264337593544" },
    "parameter_invalid",
    "cap_decimal",
  ],
  ["cap_decimal empty", { ...valid, cap_decimal: "" }, "parameter_invalid", "cap_decimal"],
  ["cap_decimal as a number", { ...valid, cap_decimal: 25 }, "parameter_invalid", "cap_decimal"],
  ["cap_decimal null", { ...valid, cap_decimal: null }, "parameter_invalid", "cap_decimal"],
  ["period week", { ...valid, period: "week" }, "period_unsupported", "period"],
  ["period as a number", { ...valid, period: 1 }, "parameter_invalid", "period"],
  ["customer empty", { ...valid, customer: "" }, "parameter_invalid", "customer"],
  ["customer too long", { ...valid, customer: "x".repeat(501) }, "parameter_invalid", "customer"],
  ["customer as an object", { ...valid, customer: { id: 1 } }, "parameter_invalid", "customer"],
  ["reference as a number", { ...valid, reference: 7 }, "parameter_invalid", "reference"],
  ["unknown chain", { ...valid, chain: 999_999 }, "chain_unknown", "chain"],
  ["chain as a string", { ...valid, chain: "31337" }, "parameter_invalid", "chain"],
  ["chain not configured", { ...valid, chain: 31339 }, "chain_not_configured", "chain"],
  ["unknown token", { ...valid, token: "DAI" }, "token_unknown", "token"],
  ["approval_periods 0", { ...valid, approval_periods: 0 }, "parameter_invalid", "approval_periods"],
  ["approval_periods 121", { ...valid, approval_periods: 121 }, "parameter_invalid", "approval_periods"],
  ["approval_periods 1.5", { ...valid, approval_periods: 1.5 }, "parameter_invalid", "approval_periods"],
  ["missing cap_decimal", without("cap_decimal"), "parameter_missing", "cap_decimal"],
  ["missing period", without("period"), "parameter_missing", "period"],
  ["missing customer", without("customer"), "parameter_missing", "customer"],
  ["unknown field", { ...valid, metadata: {} }, "parameter_unknown", "metadata"],
];

const amounts: Array<[string, unknown, string]> = [
  ["abc", "abc", "parameter_invalid"],
  ["-1", "-1", "parameter_invalid"],
  ["0", "0", "parameter_invalid"],
  ["1e5", "1e5", "parameter_invalid"],
  ["' 1'", " 1", "parameter_invalid"],
  ["7 decimals", "1.0000001", "parameter_invalid"],
  ["above the cap", "25.000001", "mandate_cap_exceeded"],
  ["far above any token", "9".repeat(90), "parameter_invalid"],
  ["a number", 5, "parameter_invalid"],
  ["null", null, "parameter_invalid"],
];

describe("bad input changes nothing and gets a 4xx in the error shape", () => {
  it.each(mandateCases)("POST /v1/mandates: %s", async (_name, body, code, param) => {
    const before = await counts();
    const response = await api("/v1/mandates", { key, body });
    expect(response.status, response.text).toBe(400);
    expect(expectErrorShape(response.json)).toMatchObject({ code, param });
    expect(await counts()).toEqual(before);
  });

  it.each(amounts)("POST /v1/mandates/{id}/charges: amount_decimal %s", async (_name, amount, code) => {
    const before = await counts();
    const response = await api(`/v1/mandates/${mandateId}/charges`, {
      key,
      body: { amount_decimal: amount },
    });
    expect(response.status, response.text).toBe(400);
    expect(expectErrorShape(response.json)).toMatchObject({ code, param: "amount_decimal" });
    expect(await counts()).toEqual(before);
  });

  it("an unknown or another merchant's mandate or charge is a 404", async () => {
    const before = await counts();
    for (const path of [
      "/v1/mandates/mdt_0000000000000000000000000X",
      `/v1/mandates/${otherMandateId}`,
      `/v1/mandates/${otherMandateId}/charges`,
      "/v1/charges/ch_0000000000000000000000000X",
      "/v1/events/evt_0000000000000000000000000X",
    ]) {
      const response = await api(path, { key });
      expect(response.status, path).toBe(404);
      expect(expectErrorShape(response.json).code).toBe("resource_missing");
    }
    for (const [path, body] of [
      [`/v1/mandates/${otherMandateId}/charges`, { amount_decimal: "1" }],
      ["/v1/mandates/not-an-id/charges", { amount_decimal: "1" }],
      ["/v1/charges/ch_0000000000000000000000000X/return", {}],
      [`/v1/test/mandates/${otherMandateId}/fund`, { amount_decimal: "1" }],
      [`/v1/test/mandates/${otherMandateId}/authorize`, {}],
    ] as const) {
      const response = await api(path, { key, body });
      expect(response.status, path).toBe(404);
      expectErrorShape(response.json);
    }
    expect(await counts()).toEqual(before);
  });

  it("rejects bad list parameters", async () => {
    for (const q of [
      "limit=0",
      "limit=101",
      "limit=abc",
      "starting_after=nope",
      "status=done",
      "colour=red",
    ]) {
      const response = await api(`/v1/mandates?${q}`, { key });
      expect(response.status, q).toBe(400);
      expectErrorShape(response.json);
    }
  });
});

const fields = ["cap_decimal", "period", "customer", "reference", "chain", "token", "approval_periods"];
const anyJson = anyValue(["25", "0.5", "month", "USDC", "31337"]);

describe("fuzzed bodies", () => {
  it("POST /v1/mandates: a 200 with a mandate, or a 4xx that changed nothing; never a 500", () =>
    assertCreatedOrNothingChanged({
      path: "/v1/mandates",
      key,
      object: "mandate",
      bodies: bodiesAround(valid, fields, fields.slice(0, 4), anyJson),
      counts,
    }));

  it("POST /v1/mandates/{id}/charges and raw JSON: always a 4xx that changed nothing", async () => {
    const body = fc.oneof(
      fc.record({ amount_decimal: anyJson }),
      fc.dictionary(fc.string({ maxLength: 16 }), anyJson, { maxKeys: 3 }),
    );
    await fc.assert(
      fc.asyncProperty(body, fc.option(fc.json(), { nil: undefined }), async (json, raw) => {
        const before = await counts();
        // The mandate is not signed: even a well-formed amount is refused.
        const response = await api(
          `/v1/mandates/${mandateId}/charges`,
          raw === undefined
            ? { key, body: json }
            : { key, rawBody: raw, headers: { "content-type": "application/json" } },
        );
        expect(response.status, response.text).toBeGreaterThanOrEqual(400);
        expect(response.status, response.text).toBeLessThan(500);
        expectErrorShape(response.json);
        expect(await counts()).toEqual(before);
      }),
      { numRuns: FUZZ_RUNS },
    );
  });
});
