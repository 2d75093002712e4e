/**
 * Bad input on the payment endpoints: a table of malformed values for every field, another merchant's
 * payments, bad list parameters, then fuzzed bodies. Always a 4xx in the one error shape, never a 500,
 * and nothing changes (no payment, no transfer, no event).
 */
import { beforeAll, describe, expect, it } from "vitest";
import { anyValue, assertCreatedOrNothingChanged, bodiesAround } from "./fuzzed-bodies.ts";
import { api, expectErrorShape, merchantOnTestChain, newMerchantWithKey, query } from "./helpers.ts";

let key: string;
let merchantId: string;
let paymentId: string;
let otherPaymentId: string;

const valid = { amount_decimal: "19.99", reference: "order-7", description: "A lamp", expires_in: 900 };

const counts = async () =>
  (
    await query<{ payments: number; transfers: number; events: number }>(
      `SELECT (SELECT count(*)::int FROM billing.payments WHERE merchant_id = $1) AS payments,
              (SELECT count(*)::int FROM billing.payment_transfers t JOIN billing.payments p ON p.id = t.payment_id
                WHERE p.merchant_id = $1) AS transfers,
              (SELECT count(*)::int FROM billing.events WHERE merchant_id = $1) AS events`,
      [merchantId],
    )
  )[0];

beforeAll(async () => {
  ({ key, merchantId } = await merchantOnTestChain());
  paymentId = (await api("/v1/payments", { key, body: valid })).json.id;
  const other = await merchantOnTestChain();
  otherPaymentId = (await api("/v1/payments", { key: other.key, body: valid })).json.id;
});

const without = (field: keyof typeof valid) => {
  const { [field]: _, ...rest } = valid;
  return rest;
};

const createCases: Array<[string, unknown, string, string | null]> = [
  ["amount_decimal abc", { ...valid, amount_decimal: "abc" }, "parameter_invalid", "amount_decimal"],
  ["amount_decimal -1", { ...valid, amount_decimal: "-1" }, "parameter_invalid", "amount_decimal"],
  ["amount_decimal 0", { ...valid, amount_decimal: "0" }, "parameter_invalid", "amount_decimal"],
  ["amount_decimal 1e5", { ...valid, amount_decimal: "1e5" }, "parameter_invalid", "amount_decimal"],
  [
    "amount_decimal 7 decimals",
    { ...valid, amount_decimal: "1.0000001" },
    "parameter_invalid",
    "amount_decimal",
  ],
  [
    "amount_decimal too large",
    { ...valid, amount_decimal: "9".repeat(40) },
    "parameter_invalid",
    "amount_decimal",
  ],
  ["amount_decimal as a number", { ...valid, amount_decimal: 5 }, "parameter_invalid", "amount_decimal"],
  [
    "amount_decimal with a NUL",
    { ...valid, amount_decimal: "5\u0000" },
    "parameter_invalid",
    "amount_decimal",
  ],
  ["missing amount_decimal", without("amount_decimal"), "parameter_missing", "amount_decimal"],
  ["expires_in 59", { ...valid, expires_in: 59 }, "parameter_invalid", "expires_in"],
  ["expires_in above 7 days", { ...valid, expires_in: 604_801 }, "parameter_invalid", "expires_in"],
  ["expires_in 1.5", { ...valid, expires_in: 1.5 }, "parameter_invalid", "expires_in"],
  ["expires_in as a string", { ...valid, expires_in: "600" }, "parameter_invalid", "expires_in"],
  ["reference empty", { ...valid, reference: "" }, "parameter_invalid", "reference"],
  ["reference too long", { ...valid, reference: "r".repeat(501) }, "parameter_invalid", "reference"],
  ["description as an object", { ...valid, description: { a: 1 } }, "parameter_invalid", "description"],
  ["unknown chain", { ...valid, chain: 999_999 }, "chain_unknown", "chain"],
  ["chain not configured", { ...valid, chain: 31339 }, "chain_not_configured", "chain"],
  ["unknown token", { ...valid, token: "DAI" }, "token_unknown", "token"],
  ["unknown field", { ...valid, metadata: {} }, "parameter_unknown", "metadata"],
];

describe("bad input on payments changes nothing and gets a 4xx in the error shape", () => {
  it.each(createCases)("POST /v1/payments: %s", async (_name, body, code, param) => {
    const before = await counts();
    const response = await api("/v1/payments", { key, body });
    expect(response.status, response.text).toBe(400);
    expect(expectErrorShape(response.json)).toMatchObject({ code, param });
    expect(await counts()).toEqual(before);
  });

  it("an unknown or another merchant's payment is a 404, on every route", async () => {
    const before = await counts();
    for (const path of [
      "/v1/payments/pay_0000000000000000000000000X",
      `/v1/payments/${otherPaymentId}`,
      "/v1/payments/pay_%00",
      "/v1/payments/not-an-id",
    ]) {
      const response = await api(path, { key });
      expect(response.status, path).toBe(404);
      expect(expectErrorShape(response.json).code).toBe("resource_missing");
    }
    for (const [path, body] of [
      [`/v1/payments/${otherPaymentId}/cancel`, {}],
      [`/v1/payments/${otherPaymentId}/return`, {}],
      [`/v1/test/payments/${otherPaymentId}/pay`, { amount_decimal: "1" }],
      ["/v1/payments/pay_0000000000000000000000000X/cancel", {}],
    ] as const) {
      const response = await api(path, { key, body });
      expect(response.status, path).toBe(404);
      expectErrorShape(response.json);
    }
    expect(await counts()).toEqual(before);
  });

  it("refuses bad bodies on cancel, return and the test payment", async () => {
    const before = await counts();
    for (const [path, body, code, param] of [
      [`/v1/payments/${paymentId}/cancel`, { reason: "x" }, "parameter_unknown", "reason"],
      [`/v1/payments/${paymentId}/return`, { address: "0x12" }, "parameter_invalid", "address"],
      [`/v1/payments/${paymentId}/return`, { address: 5 }, "parameter_invalid", "address"],
      [`/v1/payments/${paymentId}/return`, {}, "payment_not_returnable", "id"],
      [`/v1/test/payments/${paymentId}/pay`, { amount_decimal: "0" }, "parameter_invalid", "amount_decimal"],
      [
        `/v1/test/payments/${paymentId}/pay`,
        { amount_decimal: "1", from: "me" },
        "parameter_invalid",
        "from",
      ],
      [`/v1/test/payments/${paymentId}/pay`, {}, "parameter_missing", "amount_decimal"],
    ] as const) {
      const response = await api(path, { key, body });
      expect(response.status, `${path} ${JSON.stringify(body)}: ${response.text}`).toBe(400);
      expect(expectErrorShape(response.json)).toMatchObject({ code, param });
    }
    expect(await counts()).toEqual(before);
  });

  it("refuses bad list parameters", async () => {
    for (const q of [
      "limit=0",
      "limit=101",
      "status=done",
      "reference=",
      "colour=red",
      "starting_after=nope",
    ]) {
      const response = await api(`/v1/payments?${q}`, { key });
      expect(response.status, q).toBe(400);
      expectErrorShape(response.json);
    }
  });

  it("a live key cannot use the test payment helper", async () => {
    const live = await newMerchantWithKey("live");
    const response = await api(`/v1/test/payments/${paymentId}/pay`, {
      key: live.key,
      body: { amount_decimal: "1" },
    });
    expect(response.status).toBe(404);
    expect(expectErrorShape(response.json).code).toBe("route_not_found");
  });
});

const fields = ["amount_decimal", "chain", "token", "reference", "description", "expires_in"];

describe("fuzzed payment bodies", () => {
  it("POST /v1/payments: a 200 with a payment, or a 4xx that changed nothing; never a 500", () =>
    assertCreatedOrNothingChanged({
      path: "/v1/payments",
      key,
      object: "payment",
      bodies: bodiesAround(
        valid,
        fields,
        ["amount_decimal"],
        anyValue(["25", "0.5", "USDC", "31337", "\u0000"]),
      ),
      counts,
    }));
});
