/**
 * The typed client's additions to openapi-fetch, against a recording fetch: the key, idempotency keys
 * kept across retries, which failures are retried and how long it waits.
 */
import { describe, expect, it } from "vitest";
import { createBillingClient, retryDelayMs } from "../../client/index.ts";

interface Sent {
  readonly method: string;
  readonly url: string;
  readonly headers: Headers;
  readonly body: string;
}

const recording = (answers: ReadonlyArray<Response | Error>) => {
  const sent: Sent[] = [];
  const waits: number[] = [];
  let next = 0;
  const fetch = async (input: RequestInfo | URL) => {
    const request = input as Request;
    sent.push({
      method: request.method,
      url: request.url,
      headers: request.headers,
      body: await request.text(),
    });
    const answer = answers[Math.min(next++, answers.length - 1)];
    if (answer instanceof Error) throw answer;
    return (answer as Response).clone();
  };
  const client = createBillingClient({
    baseUrl: "http://127.0.0.1:9/",
    apiKey: "sk_test_abc",
    fetch: fetch as typeof globalThis.fetch,
    sleep: async (ms) => {
      waits.push(ms);
    },
  });
  return { client, sent, waits };
};

const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });

const mandate = { id: "mdt_1", object: "mandate" };
const error = (code: string) => ({
  error: { type: "invalid_request_error", code, message: "no", param: null },
});

describe("typed client", () => {
  it("sends the key, and an idempotency key on POST only, kept across retries of the same call", async () => {
    const { client, sent, waits } = recording([
      json(503, error("chain_unavailable")),
      new TypeError("fetch failed"),
      json(200, mandate),
    ]);
    const { data } = await client.POST("/v1/mandates", {
      body: { cap_decimal: "25", period: "month", customer: "cus_1" },
    });
    expect(data?.id).toBe("mdt_1");
    expect(sent).toHaveLength(3);
    const keys = sent.map((s) => s.headers.get("idempotency-key"));
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(new Set(keys).size).toBe(1);
    expect(sent.every((s) => s.headers.get("authorization") === "Bearer sk_test_abc")).toBe(true);
    expect(sent.every((s) => s.body === '{"cap_decimal":"25","period":"month","customer":"cus_1"}')).toBe(
      true,
    );
    expect(sent[0]?.url).toBe("http://127.0.0.1:9/v1/mandates");
    expect(waits).toEqual([500, 1000]);

    const second = recording([json(200, mandate)]);
    await second.client.POST("/v1/mandates", {
      body: { cap_decimal: "25", period: "month", customer: "cus_1" },
    });
    expect(second.sent[0]?.headers.get("idempotency-key")).not.toBe(keys[0]);
    await second.client.GET("/v1/mandates/{id}", { params: { path: { id: "mdt_1" } } });
    expect(second.sent[1]?.headers.get("idempotency-key")).toBeNull();
  });

  it("in the console, sends no key: the session's CSRF token on POSTs (the browser sends the cookie)", async () => {
    const sent: Request[] = [];
    const client = createBillingClient({
      baseUrl: "http://127.0.0.1:9", // a page of the service's own uses "" (relative URLs)
      csrfToken: "csrf-abc",
      fetch: (async (input: RequestInfo | URL) => {
        sent.push(input as Request);
        return json(200, mandate);
      }) as typeof globalThis.fetch,
      idempotencyKey: () => "key-1",
    });
    await client.GET("/v1/mandates");
    await client.POST("/v1/mandates", { body: { cap_decimal: "25", period: "month", customer: "cus_1" } });
    expect(sent.map((r) => r.headers.get("authorization"))).toEqual([null, null]);
    expect(sent.map((r) => r.headers.get("x-csrf-token"))).toEqual([null, "csrf-abc"]);
    expect(sent[1]?.headers.get("idempotency-key")).toBe("key-1");
  });

  it("keeps a key the caller gives", async () => {
    const { client, sent } = recording([json(200, mandate)]);
    await client.POST("/v1/mandates", {
      params: { header: { "Idempotency-Key": "order-42" } },
      body: { cap_decimal: "25", period: "month", customer: "cus_1" },
    });
    expect(sent[0]?.headers.get("idempotency-key")).toBe("order-42");
  });

  it("returns a 4xx at once, typed as the API's error shape; gives up after two retries", async () => {
    const refused = recording([json(400, error("parameter_invalid")), json(200, mandate)]);
    const {
      data,
      error: failure,
      response,
    } = await refused.client.POST("/v1/mandates", {
      body: { cap_decimal: "x", period: "month", customer: "cus_1" },
    });
    expect(data).toBeUndefined();
    expect(response.status).toBe(400);
    expect(failure?.error.code).toBe("parameter_invalid");
    expect(refused.sent).toHaveLength(1);

    const down = recording([json(429, error("rate_limited"), { "retry-after": "3" })]);
    const last = await down.client.GET("/v1/mandates");
    expect(last.response.status).toBe(429);
    expect(down.sent).toHaveLength(3);
    expect(down.waits).toEqual([3000, 3000]);

    const unreachable = recording([new TypeError("fetch failed")]);
    await expect(unreachable.client.GET("/v1/chains")).rejects.toThrow("fetch failed");
    expect(unreachable.sent).toHaveLength(3);
  });

  it("waits 0.5 s doubling up to 8 s, or what Retry-After says (at most 8 s)", () => {
    expect([1, 2, 3, 4, 5, 6].map((n) => retryDelayMs(n, null))).toEqual([500, 1000, 2000, 4000, 8000, 8000]);
    expect(retryDelayMs(1, "2")).toBe(2000);
    expect(retryDelayMs(1, "600")).toBe(8000);
    expect(retryDelayMs(2, "soon")).toBe(1000);
  });
});
