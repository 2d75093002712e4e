/**
 * Every operation of /v1/openapi.json (and the hosted page's JSON routes) under random and hostile
 * input: NUL and lone surrogates in ids, queries, headers and bodies, 70 KB bodies, duplicate and
 * `__proto__` keys, swapped types, huge numbers, deep nesting, wrong content types, bad keys.
 * No answer may be a 5xx, and every 4xx has the one error shape. `FUZZ_API_REQUESTS` (default
 * 10,000) and `FUZZ_API_SEED` (default random, printed on failure) steer it; `npm run fuzz` is the
 * standalone runner.
 */
import { expect, it } from "vitest";
import { formatReport, runFuzz } from "../../scripts/fuzz/api-fuzzer.ts";
import { api, expectErrorShape, newAddress, newMerchantWithKey, stack } from "./helpers.ts";

const REQUESTS = Number(process.env.FUZZ_API_REQUESTS ?? 10_000);
const SEED = Number(process.env.FUZZ_API_SEED ?? Math.floor(Math.random() * 2 ** 31));

it(`answers ${REQUESTS} fuzzed requests without a 5xx, every 4xx in the error shape`, async () => {
  const { key } = await newMerchantWithKey("test");
  const report = await runFuzz({
    baseUrl: stack().apiUrl,
    key,
    requests: REQUESTS,
    seed: SEED,
    concurrency: 16,
    // The hosted page limits requests per client address: keep this run's out of 127.0.0.1's budget.
    localAddress: `127.0.${1 + (SEED % 250)}.${2 + (SEED % 251)}`,
  });
  console.log(formatReport(report));
  expect(report.requests).toBe(REQUESTS);
  expect(report.findings.length, `FUZZ_API_SEED=${SEED}\n${formatReport(report)}`).toBe(0);
  // The generator reaches the handlers, not only the validators.
  expect(report.byClass["2xx"] ?? 0).toBeGreaterThan(REQUESTS / 20);
}, 300_000);

it("answers the inputs that once reached Postgres with the route's own 4xx", async () => {
  const { key } = await newMerchantWithKey("test");
  for (const [method, path, status, code, param] of [
    ["GET", "/v1/charges/inv_%00", 404, "resource_missing", "id"],
    ["GET", "/v1/events/1%00", 404, "resource_missing", "id"],
    ["GET", "/v1/prices/price_%00", 404, "resource_missing", "id"],
    ["GET", "/v1/webhook_endpoints/%ED%A0%80/deliveries", 404, "resource_missing", "id"],
    ["POST", "/v1/test/mandates/x%00/authorize", 404, "resource_missing", "id"],
    ["POST", "/v1/events/evt_%00/replay", 404, "resource_missing", "id"],
    ["GET", "/authorize/abc%00/session", 404, "authorization_not_found", null],
    ["GET", "/v1/invoices?subscription=sub_%00", 400, "parameter_invalid", "subscription"],
    ["GET", "/v1/mandates?customer=a%00", 400, "parameter_invalid", "customer"],
  ] as const) {
    const response = await api(path, {
      key: path.startsWith("/authorize") ? null : key,
      method,
      ...(method === "POST" ? { body: {} } : {}),
    });
    expect(response.status, `${method} ${path}: ${response.text}`).toBe(status);
    expect(expectErrorShape(response.json), path).toMatchObject({ code, param });
  }
  for (const [body, param] of [
    ['{"cap_decimal":"1","period":"month","customer":"a\\u0000"}', "customer"],
    ['{"cap_decimal":"1","period":"month","customer":"\\ud800"}', "customer"],
    ['{"cap_decimal":"1","period":"month","customer":"a","reference":"x\\u0000y"}', "reference"],
    [`{"cap_decimal":"1","period":"month","customer":"${"y".repeat(5001)}"}`, "customer"],
  ] as const) {
    const response = await api("/v1/mandates", {
      key,
      rawBody: body,
      headers: { "content-type": "application/json" },
    });
    expect(response.status, response.text).toBe(400);
    expect(expectErrorShape(response.json)).toMatchObject({ code: "parameter_invalid", param });
  }
});

it("configures a chain from concurrent calls without a 5xx (found by the fuzzer)", async () => {
  const { key } = await newMerchantWithKey("test");
  const answers = await Promise.all(
    Array.from({ length: 12 }, () =>
      api("/v1/merchant/chains", { key, body: { chain: 31337, payout_address: newAddress() } }),
    ),
  );
  expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
  const current = await api("/v1/merchant/chains", { key });
  expect(current.json.data.filter((c: { chain: number }) => c.chain === 31337)).toHaveLength(1);
});
