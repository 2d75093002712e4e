/**
 * Restricted keys (`rk_test_…`, `rk_live_…`) for finance: every GET answers as for the merchant's secret
 * key, and every operation that changes something — each POST and DELETE of the published OpenAPI
 * document, not a hand-kept list — gets 403 `api_key_restricted` with the error shape, pointed at the
 * merchant's real objects, and changes nothing. A console session signed in with one is read-only too.
 */
import { describe, expect, it } from "vitest";
import { consoleBrowser, heading, nav, signIn } from "./console-driver.ts";
import { api, cli, expectErrorShape, merchantOnTestChain, query, sessionCookieOf } from "./helpers.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON bodies
type Json = any;
type Merchant = Awaited<ReturnType<typeof merchantOnTestChain>>;

const { openConsole } = consoleBrowser();

const restrictedKeyOf = async (merchantId: string) => {
  const [keyId, key] = (
    await cli("keys", "create", "--merchant", merchantId, "--mode", "test", "--restricted")
  ).split("\t");
  return { keyId: String(keyId), key: String(key) };
};

/** One object of each kind the API's paths name by id, made with the secret key. */
const objectsOf = async (m: Merchant) => {
  const ok = async (path: string, body?: unknown) => {
    const answer = await m.call(path, body);
    expect(answer.status, `${path}: ${answer.text}`).toBe(200);
    return answer.json as Json;
  };
  const mandate = await ok("/v1/mandates", { cap_decimal: "5", period: "month", customer: "cus_rk" });
  await ok(`/v1/test/mandates/${mandate.id}/fund`, { amount_decimal: "5" });
  await ok(`/v1/test/mandates/${mandate.id}/authorize`, {});
  const charge = await ok(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "1" });
  const payment = await ok("/v1/payments", { amount_decimal: "2" });
  const price = await ok("/v1/prices", { product_name: "Ledger", amount_decimal: "3", chain: 31337 });
  const subscription = await ok("/v1/subscriptions", { customer: "cus_rk_sub", price: price.id });
  // Loopback, and nothing listens: the test stack lets test-mode endpoints be private.
  const endpoint = await ok("/v1/webhook_endpoints", {
    url: "http://127.0.0.1:9/hooks",
    events: ["charge.succeeded"],
  });
  const [event] = (await ok("/v1/events?limit=1")).data as Json[];
  return {
    mandates: mandate.id,
    charges: charge.id,
    payments: payment.id,
    prices: price.id,
    subscriptions: subscription.id,
    webhook_endpoints: endpoint.id,
    events: event.id,
  } as Record<string, string>;
};

/** Everything the merchant can see, read with its secret key. */
const snapshot = async (m: Merchant) => {
  const lists = [
    "/v1/merchant/chains",
    "/v1/mandates?limit=100",
    "/v1/payments?limit=100",
    "/v1/prices?limit=100",
    "/v1/subscriptions?limit=100",
    "/v1/invoices?limit=100",
    "/v1/webhook_endpoints?limit=100",
    "/v1/events?limit=100",
  ];
  return Promise.all(lists.map(async (path) => [path, (await m.call(path)).json]));
};

describe("restricted keys", () => {
  it("read what the secret key reads, and every POST and DELETE is refused before anything is recorded", async () => {
    const m = await merchantOnTestChain();
    const ids = await objectsOf(m);
    const restricted = await restrictedKeyOf(m.merchantId);
    expect(restricted.key).toMatch(/^rk_test_[0-9A-Za-z]{43}$/);
    const spec = (await api("/v1/openapi.json", { key: null })).json as Json;
    // Each `/{noun}/{param}` gets the merchant's object of that noun (an unknown noun an id that is none).
    const fill = (path: string) =>
      path.replace(/\/([a-z_]+)\/\{[a-z_]+\}/g, (_, noun: string) => `/${noun}/${ids[noun] ?? "x_none"}`);

    const before = await snapshot(m);
    const refused: string[] = [];
    const read: string[] = [];
    for (const [path, operations] of Object.entries(spec.paths as Record<string, Record<string, unknown>>)) {
      if (!path.startsWith("/v1/")) continue;
      for (const method of Object.keys(operations)) {
        const url = fill(path);
        if (method === "get") {
          const withKey = await api(url, { key: restricted.key });
          const withSecret = await m.call(url);
          expect(withKey.status, `GET ${url}`).toBe(withSecret.status);
          read.push(path);
          continue;
        }
        const answer = await api(url, { key: restricted.key, method: method.toUpperCase(), body: {} });
        expect(answer.status, `${method.toUpperCase()} ${url}: ${answer.text}`).toBe(403);
        const error = expectErrorShape(answer.json);
        expect(error).toMatchObject({ code: "api_key_restricted", param: null });
        expect(error.message).toContain("restricted");
        refused.push(`${method} ${path}`);
      }
    }
    // The API's changing operations: mandates, charges, payments, prices, coupons, subscriptions, usage,
    // portal sessions, webhook endpoints, event replays, payout chains and the test helpers.
    expect(refused.length).toBeGreaterThanOrEqual(27);
    expect(refused).toContain("delete /v1/webhook_endpoints/{id}");
    expect(refused).toContain("post /v1/charges/{id}/return");
    expect(read).toContain("/v1/reconciliation");

    expect(await snapshot(m)).toEqual(before);
    const recorded = await query<{ n: string }>(
      "SELECT count(*)::text AS n FROM billing.idempotency_keys WHERE api_key_id = $1",
      [restricted.keyId],
    );
    expect(recorded[0]?.n).toBe("0");
  });

  it("signs the console in read-only: a badge, no control that changes anything, and the API refuses its POSTs", async () => {
    const m = await merchantOnTestChain();
    const { key } = await restrictedKeyOf(m.merchantId);
    const session = await api("/console/session", { key: null, body: { api_key: key } });
    expect(session.status, session.text).toBe(200);
    expect(session.json).toMatchObject({ read_only: true, livemode: false, merchant: m.merchantId });
    const cookie = sessionCookieOf(session.headers.get("set-cookie"));
    const post = await api("/v1/prices", {
      key: null,
      headers: { cookie, "x-csrf-token": session.json.csrf_token },
      body: { product_name: "No", amount_decimal: "1", chain: 31337 },
    });
    expect(post.status, post.text).toBe(403);
    expect(expectErrorShape(post.json).code).toBe("api_key_restricted");

    const { page } = await openConsole();
    await signIn(page, key);
    await page.getByText("Read-only", { exact: true }).waitFor();
    await nav(page, "Prices").click();
    await heading(page, "Prices and coupons").waitFor();
    // Rendered, and hidden: the page is the same for every key, the session's mode hides its controls.
    expect(await page.getByRole("button", { name: "Add price", includeHidden: true }).count()).toBe(1);
    expect(await page.getByRole("button", { name: "Add price", includeHidden: true }).isVisible()).toBe(
      false,
    );
    await nav(page, "Webhooks").click();
    await heading(page, "Webhooks").waitFor();
    expect(await page.getByRole("button", { name: "Add endpoint", includeHidden: true }).isVisible()).toBe(
      false,
    );
  });
});
