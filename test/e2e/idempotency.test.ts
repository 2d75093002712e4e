import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  api,
  expectErrorShape,
  merchantOnTestChain,
  newAddress,
  newMerchantWithKey,
  query,
} from "./helpers.ts";

const bodyFor = () => ({ chain: 31337, payout_address: newAddress() });
const body = bodyFor();

const configRows = (merchantId: string) =>
  query<{ n: number }>("SELECT count(*)::int AS n FROM billing.merchant_chains WHERE merchant_id = $1", [
    merchantId,
  ]).then((rows) => rows[0]?.n);

describe("Idempotency-Key", () => {
  it("is required on every POST", async () => {
    const response = await api("/v1/merchant/chains", { body, idempotencyKey: null });
    expect(response.status).toBe(400);
    expect(expectErrorShape(response.json).code).toBe("idempotency_key_missing");
    const tooLong = await api("/v1/merchant/chains", { body, idempotencyKey: "k".repeat(256) });
    expect(tooLong.status).toBe(400);
    expect(expectErrorShape(tooLong.json).code).toBe("idempotency_key_invalid");
  });

  it("replays the first response for the same key and body, and refuses another body with 409", async () => {
    const { merchantId, key } = await newMerchantWithKey();
    const body = bodyFor();
    const idempotencyKey = randomUUID();
    const first = await api("/v1/merchant/chains", { key, body, idempotencyKey });
    const again = await api("/v1/merchant/chains", {
      key,
      body: { payout_address: body.payout_address, chain: 31337 },
      idempotencyKey,
    });
    expect(first.status).toBe(200);
    expect(again.status).toBe(200);
    expect(again.text).toBe(first.text);
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(first.headers.get("idempotent-replayed")).toBeNull();
    const reused = await api("/v1/merchant/chains", {
      key,
      body: { ...body, tokens: ["USDC"] },
      idempotencyKey,
    });
    expect(reused.status).toBe(409);
    expect(expectErrorShape(reused.json)).toMatchObject({
      type: "idempotency_error",
      code: "idempotency_key_reused",
    });
    expect(await configRows(merchantId)).toBe(1);
  });

  it("replays a stored 4xx too, and its attempt changed nothing", async () => {
    const { merchantId, key } = await newMerchantWithKey();
    const body = bodyFor();
    const idempotencyKey = randomUUID();
    const bad = { chain: 31337, payout_address: body.payout_address, tokens: ["DAI"] };
    const first = await api("/v1/merchant/chains", { key, body: bad, idempotencyKey });
    const again = await api("/v1/merchant/chains", { key, body: bad, idempotencyKey });
    expect(first.status).toBe(400);
    expect(again.status).toBe(400);
    expect(again.text).toBe(first.text);
    expect(await configRows(merchantId)).toBe(0);
  });

  it("is scoped per API key", async () => {
    const a = await newMerchantWithKey();
    const b = await newMerchantWithKey();
    const idempotencyKey = randomUUID();
    // Another body under the same Idempotency-Key: a 409 if keys were global, a new request per API key.
    const fromA = await api("/v1/merchant/chains", { key: a.key, body: bodyFor(), idempotencyKey });
    const fromB = await api("/v1/merchant/chains", { key: b.key, body: bodyFor(), idempotencyKey });
    expect(fromA.status).toBe(200);
    expect(fromB.status).toBe(200);
    expect(fromB.json.id).not.toBe(fromA.json.id);
  });

  it("turns 50 concurrent identical POSTs into one effect and 50 identical responses", async () => {
    const { merchantId, key } = await newMerchantWithKey();
    const body = bodyFor();
    const idempotencyKey = randomUUID();
    const responses = await Promise.all(
      Array.from({ length: 50 }, () => api("/v1/merchant/chains", { key, body, idempotencyKey })),
    );
    expect(responses.map((r) => r.status)).toEqual(Array(50).fill(200));
    expect(new Set(responses.map((r) => r.text)).size).toBe(1);
    expect(responses.filter((r) => r.headers.get("idempotent-replayed") === null)).toHaveLength(1);
    expect(await configRows(merchantId)).toBe(1);
  });

  it("turns 50 concurrent identical refused POSTs into one stored 4xx, 50 identical responses, no effect", async () => {
    // A refusal rolls its attempt back before its reply is stored: a duplicate arriving in between runs
    // the handler itself, but only one reply is ever stored and every other response replays it.
    const { merchantId, key } = await newMerchantWithKey();
    const bad = { chain: 31337, payout_address: bodyFor().payout_address, tokens: ["DAI"] };
    const idempotencyKey = randomUUID();
    const responses = await Promise.all(
      Array.from({ length: 50 }, () => api("/v1/merchant/chains", { key, body: bad, idempotencyKey })),
    );
    expect(responses.map((r) => r.status)).toEqual(Array(50).fill(400));
    expect(new Set(responses.map((r) => r.text)).size).toBe(1);
    expect(responses.filter((r) => r.headers.get("idempotent-replayed") === null)).toHaveLength(1);
    expect(await configRows(merchantId)).toBe(0);
    const later = await api("/v1/merchant/chains", { key, body: bad, idempotencyKey });
    expect(later.text).toBe(responses[0]?.text);
    expect(later.headers.get("idempotent-replayed")).toBe("true");
  });

  describe("on POST /v1/mandates, the hot route", () => {
    const mandateBody = (customer: string) => ({ cap_decimal: "10.00", period: "month", customer });
    const mandatesOf = (merchantId: string, customer: string) =>
      query<{ n: number }>(
        "SELECT count(*)::int AS n FROM billing.mandates WHERE merchant_id = $1 AND customer = $2",
        [merchantId, customer],
      ).then((rows) => rows[0]?.n);

    it("turns 50 concurrent identical POSTs into one mandate and 50 identical responses", async () => {
      const { merchantId, key } = await merchantOnTestChain();
      const customer = `cus_${randomUUID()}`;
      const idempotencyKey = randomUUID();
      const responses = await Promise.all(
        Array.from({ length: 50 }, () =>
          api("/v1/mandates", { key, body: mandateBody(customer), idempotencyKey }),
        ),
      );
      expect(responses.map((r) => r.status)).toEqual(Array(50).fill(200));
      expect(new Set(responses.map((r) => r.text)).size).toBe(1);
      expect(responses.filter((r) => r.headers.get("idempotent-replayed") === null)).toHaveLength(1);
      expect(await mandatesOf(merchantId, customer)).toBe(1);
    });

    it("replays a finished POST without opening another mandate, and refuses another body with 409", async () => {
      const { merchantId, key } = await merchantOnTestChain();
      const customer = `cus_${randomUUID()}`;
      const idempotencyKey = randomUUID();
      const first = await api("/v1/mandates", { key, body: mandateBody(customer), idempotencyKey });
      expect(first.status, first.text).toBe(200);
      expect(first.headers.get("idempotent-replayed")).toBeNull();
      const again = await api("/v1/mandates", { key, body: mandateBody(customer), idempotencyKey });
      expect(again.status).toBe(200);
      expect(again.text).toBe(first.text);
      expect(again.headers.get("idempotent-replayed")).toBe("true");
      const reused = await api("/v1/mandates", {
        key,
        body: mandateBody(`${customer}_other`),
        idempotencyKey,
      });
      expect(reused.status).toBe(409);
      expect(expectErrorShape(reused.json).code).toBe("idempotency_key_reused");
      // A refusal of the reused key's body is still the 409: the stored request decides.
      const refusedBody = { ...mandateBody(customer), cap_decimal: "not money" };
      const refusedReuse = await api("/v1/mandates", { key, body: refusedBody, idempotencyKey });
      expect(refusedReuse.status).toBe(409);
      expect(await mandatesOf(merchantId, customer)).toBe(1);
      expect(await mandatesOf(merchantId, `${customer}_other`)).toBe(0);
    });

    it("stores a refusal and replays it, with no mandate opened", async () => {
      const { merchantId, key } = await merchantOnTestChain();
      const customer = `cus_${randomUUID()}`;
      const bad = { ...mandateBody(customer), cap_decimal: "not money" };
      const idempotencyKey = randomUUID();
      const responses = await Promise.all(
        Array.from({ length: 20 }, () => api("/v1/mandates", { key, body: bad, idempotencyKey })),
      );
      expect(responses.map((r) => r.status)).toEqual(Array(20).fill(400));
      expect(new Set(responses.map((r) => r.text)).size).toBe(1);
      expect(responses.filter((r) => r.headers.get("idempotent-replayed") === null)).toHaveLength(1);
      const good = await api("/v1/mandates", { key, body: mandateBody(customer), idempotencyKey });
      expect(good.status).toBe(409);
      expect(await mandatesOf(merchantId, customer)).toBe(0);
    });
  });
});
