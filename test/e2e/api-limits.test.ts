/**
 * The API's per-merchant limits: request rates per key and class of routes (429 with `Retry-After` and
 * the `RateLimit-*` headers), open payments per merchant and chain, and each token's smallest payment
 * (docs/limits.md). The suite's stack runs with rates no test reaches; the rate and open-payment tests
 * start a service process of their own on the same database with low ones.
 */
import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { REQUEST_RATE_DEFAULTS } from "../../service/limits/request-limits.ts";
import {
  api,
  cli,
  expectErrorShape,
  merchantOnTestChain,
  newAddress,
  newMerchantWithKey,
  query,
  stack,
} from "./helpers.ts";
import { startSecondService } from "./second-service.ts";

/** A test key's default rate, which the OpenAPI document's examples show. */
const RATE = REQUEST_RATE_DEFAULTS.testPerSecond;
const OPEN_PAYMENTS = 3;

const expectRateHeaders = (headers: Headers, limit: number) => {
  expect(headers.get("ratelimit-limit")).toBe(String(limit));
  expect(headers.get("ratelimit-policy")).toBe(`${limit};w=1`);
  const remaining = Number(headers.get("ratelimit-remaining"));
  const reset = Number(headers.get("ratelimit-reset"));
  expect(Number.isInteger(remaining) && remaining >= 0 && remaining <= limit).toBe(true);
  expect(Number.isInteger(reset) && reset >= 0 && reset <= 1).toBe(true);
  return remaining;
};

const paymentsOf = async (merchantId: string) =>
  Number(
    (
      await query<{ n: string }>("SELECT count(*)::text AS n FROM billing.payments WHERE merchant_id = $1", [
        merchantId,
      ])
    )[0]?.n,
  );

describe("the suite's stack", () => {
  it("sends the class's RateLimit-* headers on every authenticated /v1 answer, errors included", async () => {
    const limit = 1_000_000; // the suite's unreached rates (scripts/stack/unreached-limits.ts)
    const read = await api("/v1/chains");
    expect(read.status).toBe(200);
    expectRateHeaders(read.headers, limit);
    const missing = await api("/v1/mandates/mdt_00000000000000000000000000");
    expect(missing.status).toBe(404);
    expectRateHeaders(missing.headers, limit);
    const write = await api("/v1/payments", { body: { amount_decimal: "x" } });
    expect(write.status).toBe(400);
    expectRateHeaders(write.headers, limit);
    // No key, no bucket to tell of.
    const anonymous = await api("/v1/chains", { key: null });
    expect(anonymous.status).toBe(401);
    expect(anonymous.headers.get("ratelimit-limit")).toBeNull();
  });

  it("refuses a payment below its token's smallest amount with 400 amount_too_small, creating nothing", async () => {
    const m = await merchantOnTestChain();
    const reference = `below-minimum-${randomUUID()}`;
    const refused = await m.call("/v1/payments", { amount_decimal: "0.009999", reference });
    expect(refused.status, refused.text).toBe(400);
    const error = expectErrorShape(refused.json);
    expect(error).toMatchObject({ code: "amount_too_small", param: "amount_decimal" });
    expect(error.message).toContain("0.01 USDC");
    expect(await paymentsOf(m.merchantId)).toBe(0);
    // The minimum itself is a payment (and the count above could see one).
    const made = await m.call("/v1/payments", { amount_decimal: "0.01", reference });
    expect(made.status, made.text).toBe(200);
    expect(await paymentsOf(m.merchantId)).toBe(1);
  });

  it("GET /v1/limits shows the key's rates, the open payments per chain and each token's minimum", async () => {
    const m = await merchantOnTestChain();
    expect((await m.call("/v1/payments", { amount_decimal: "2" })).status).toBe(200);
    const limits = await m.call("/v1/limits");
    expect(limits.status, limits.text).toBe(200);
    expect(limits.json).toMatchObject({ object: "limits", livemode: false });
    expect(limits.json.rate_limits.map((r: { class: string }) => r.class)).toEqual([
      "reads",
      "writes",
      "test_helpers",
    ]);
    const chains = limits.json.chains as Array<Record<string, unknown>>;
    expect(chains.map((c) => c.chain).sort()).toEqual([31337, 31339]);
    expect(chains.find((c) => c.chain === 31337)).toMatchObject({
      open_payments: 1,
      open_payments_limit: 10_000,
      tokens: [{ symbol: "USDC", min_payment: "10000", min_payment_decimal: "0.01" }],
    });
    expect(chains.find((c) => c.chain === 31339)).toMatchObject({ open_payments: 0 });
    // A live key sees the live chain, and no test helpers' class.
    const { key } = await newMerchantWithKey("live");
    const live = await api("/v1/limits", { key });
    expect(live.status, live.text).toBe(200);
    expect(live.json.rate_limits.map((r: { class: string }) => r.class)).toEqual(["reads", "writes"]);
    expect(live.json.chains.map((c: { chain: number }) => c.chain)).toEqual([31338]);
  });
});

describe("a service process with low limits", () => {
  let url: string;
  beforeAll(async () => {
    url = await startSecondService({
      API_RATE_LIMIT_TEST: String(RATE),
      OPEN_PAYMENTS_PER_CHAIN: String(OPEN_PAYMENTS),
      // A payment names the relayer's operator: without the stack's key the process could create none.
      RELAYER_PRIVATE_KEY: stack().relayerKey,
    });
  });

  it("answers 429 with Retry-After beyond a key's rate of a class; other keys and classes go on", async () => {
    const { merchantId, key } = await newMerchantWithKey("test");
    const [, otherKey] = (await cli("keys", "create", "--merchant", merchantId, "--mode", "test")).split(
      "\t",
    );
    const started = performance.now();
    const answers = await Promise.all(
      Array.from({ length: 3 * RATE }, () => api("/v1/chains", { key, baseUrl: url })),
    );
    const elapsedSeconds = (performance.now() - started) / 1000;
    const admitted = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status === 429);
    expect(admitted.length + refused.length).toBe(3 * RATE);
    // The bucket: RATE at once, and RATE a second after that.
    expect(admitted.length).toBeGreaterThanOrEqual(RATE);
    expect(admitted.length).toBeLessThanOrEqual(RATE + Math.ceil(elapsedSeconds * RATE));
    const first = refused[0];
    if (first === undefined) throw new Error("nothing was refused");
    expect(expectErrorShape(first.json)).toMatchObject({
      code: "rate_limited",
      type: "invalid_request_error",
    });
    // A token is back within a 25th of a second: Retry-After says 1, and the body is the documented one.
    expect(first.headers.get("retry-after")).toBe("1");
    const doc = await api("/v1/openapi.json", { key: null, baseUrl: url });
    expect(first.json).toEqual(
      doc.json.paths["/v1/chains"].get.responses["429"].content["application/json"].examples.rate_limited
        .value,
    );
    expect(expectRateHeaders(first.headers, RATE)).toBe(0);
    for (const answer of admitted) expectRateHeaders(answer.headers, RATE);

    // Another key of the same merchant has its own bucket, and the same key's writes theirs.
    const other = await api("/v1/chains", { key: otherKey, baseUrl: url });
    expect(other.status, other.text).toBe(200);
    expect(expectRateHeaders(other.headers, RATE)).toBeGreaterThanOrEqual(RATE - 1);
    const write = await api("/v1/merchant/chains", {
      key,
      baseUrl: url,
      body: { chain: 31337, payout_address: newAddress() },
    });
    expect(write.status, write.text).toBe(200);
    expectRateHeaders(write.headers, RATE);
  });

  it("refuses an open payment beyond the limit with 400 open_payments_limit_reached, creating nothing", async () => {
    const m = await merchantOnTestChain();
    const create = () =>
      api("/v1/payments", { key: m.key, baseUrl: url, body: { amount_decimal: "1", chain: 31337 } });
    const made = [];
    for (let i = 0; i < OPEN_PAYMENTS; i++) made.push(await create());
    expect(made.map((p) => p.status)).toEqual(Array(OPEN_PAYMENTS).fill(200));
    const refused = await create();
    expect(refused.status, refused.text).toBe(400);
    expect(expectErrorShape(refused.json)).toMatchObject({
      code: "open_payments_limit_reached",
      param: "chain",
    });
    expect(await paymentsOf(m.merchantId)).toBe(OPEN_PAYMENTS);
    const limits = await api("/v1/limits", { key: m.key, baseUrl: url });
    expect(limits.json.chains.find((c: { chain: number }) => c.chain === 31337)).toMatchObject({
      open_payments: OPEN_PAYMENTS,
      open_payments_limit: OPEN_PAYMENTS,
    });
    // Another chain has a count of its own.
    const configured = await m.call("/v1/merchant/chains", { chain: 31339, payout_address: newAddress() });
    expect(configured.status, configured.text).toBe(200);
    const elsewhere = await api("/v1/payments", {
      key: m.key,
      baseUrl: url,
      body: { amount_decimal: "1", chain: 31339 },
    });
    expect(elsewhere.status, elsewhere.text).toBe(200);

    // A canceled payment is no longer open: the next creation gets its place (once the refusal,
    // remembered for a second, has passed).
    const canceled = await api(`/v1/payments/${made[0]?.json.id}/cancel`, {
      key: m.key,
      baseUrl: url,
      body: {},
    });
    expect(canceled.status, canceled.text).toBe(200);
    await expect.poll(async () => (await create()).status).toBe(200);
    expect(await paymentsOf(m.merchantId)).toBe(OPEN_PAYMENTS + 2);
    expect((await create()).json.error?.code).toBe("open_payments_limit_reached");
  });
});
