/**
 * The customer portal on the real stack: `POST /v1/portal_sessions` (idempotent, bad input refused with
 * nothing created), the page's JSON scoped to one customer of one merchant (another customer's or
 * merchant's ids are 404, an expired link is refused), and the hosted page in headless Chromium: it
 * lists the customer's subscriptions and mandates with their next charge, holds and latest charges,
 * and cancels a subscription at the end of its period through the same operation and events as the API.
 * Revoking without gas: the page's revocation endpoints take only the customer's own mandates and
 * well-formed signatures, and the last test revokes from the page with the mandate's own wallet.
 * Screenshots go to test-results/portal/ (a test artifact, gitignored).
 */
import { randomUUID } from "node:crypto";
import type { Page } from "playwright-core";
import { beforeAll, describe, expect, it } from "vitest";
import { testWalletKey } from "../../service/mandates/terms.ts";
import { hostedPageBrowser, TestWallet } from "./browser-wallet.ts";
import { api, expectErrorShape, merchantOnTestChain, query } from "./helpers.ts";

const { openPage, shot, expectNoProblems } = hostedPageBrowser("test-results/portal");

const MONTH = 31 * 86_400;

type Merchant = Awaited<ReturnType<typeof merchantOnTestChain>>;

interface Subscription {
  readonly id: string;
  readonly mandate: string;
  readonly status: string;
  readonly cancel_at_period_end: boolean;
  readonly cancellation_reason: string | null;
  readonly cancellation_source: string | null;
}

/** A subscription the customer signed (test helpers), its first period billed. */
const signedSubscription = async (m: Merchant, customer: string, product = "Team", amount = "10") => {
  const price = await m.call("/v1/prices", { product_name: product, amount_decimal: amount, chain: 31337 });
  expect(price.status, price.text).toBe(200);
  const created = await m.call("/v1/subscriptions", { customer, price: price.json.id });
  expect(created.status, created.text).toBe(200);
  const sub = created.json as Subscription;
  await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "100" });
  expect((await m.call(`/v1/test/mandates/${sub.mandate}/authorize`, {})).status).toBe(200);
  await m.waitForEvents("invoice.paid", 1, (o) => o.subscription === sub.id);
  return sub;
};

const portalSession = async (m: Merchant, body: Record<string, unknown>) => {
  const created = await m.call("/v1/portal_sessions", body);
  expect(created.status, created.text).toBe(200);
  return created.json as { id: string; url: string; expires_at: number; created: number };
};

const subscription = async (m: Merchant, id: string) =>
  (await m.call(`/v1/subscriptions/${id}`)).json as Subscription;

/** The page's own API, as the browser calls it (no API key). */
const page = (url: string, path: string, body?: unknown) =>
  api(`${new URL(url).pathname}${path}`, body === undefined ? { key: null } : { key: null, body });

let shop: Merchant;
let other: Merchant;
let subA: Subscription;
let subB: Subscription;
let foreign: Subscription;
let plainMandate: string;

beforeAll(async () => {
  shop = await merchantOnTestChain();
  other = await merchantOnTestChain();
  subA = await signedSubscription(shop, "cus_a", "Team", "10");
  subB = await signedSubscription(shop, "cus_b", "Solo", "4");
  foreign = await signedSubscription(other, "cus_a", "Elsewhere", "7");
  // A mandate of cus_a without a subscription, charged once (held in escrow on the local chain).
  const mandate = await shop.call("/v1/mandates", {
    cap_decimal: "25",
    period: "month",
    customer: "cus_a",
    reference: "ord_1",
  });
  plainMandate = mandate.json.id;
  await shop.call(`/v1/test/mandates/${plainMandate}/fund`, { amount_decimal: "30" });
  await shop.call(`/v1/test/mandates/${plainMandate}/authorize`, {});
  const charge = await shop.call(`/v1/mandates/${plainMandate}/charges`, { amount_decimal: "5" });
  expect(charge.status, charge.text).toBe(200);
  await shop.waitForEvents("charge.succeeded", 1, (o) => o.id === charge.json.id);
});

describe("POST /v1/portal_sessions", () => {
  it("gives an hour's link, replays by Idempotency-Key, and refuses bad input with nothing created", async () => {
    const key = randomUUID();
    const body = { customer: "cus_a", return_url: "https://shop.example/account" };
    const first = await api("/v1/portal_sessions", { key: shop.key, body, idempotencyKey: key });
    expect(first.status, first.text).toBe(200);
    expect(first.json).toMatchObject({
      object: "portal_session",
      livemode: false,
      customer: "cus_a",
      return_url: "https://shop.example/account",
      features: {
        subscription_cancel: { enabled: true },
        mandate_revoke: { enabled: true },
      },
    });
    expect(first.json.id).toMatch(/^bps_/);
    expect(first.json.expires_at - first.json.created).toBe(3600);
    const again = await api("/v1/portal_sessions", { key: shop.key, body, idempotencyKey: key });
    expect(again.headers.get("idempotent-replayed")).toBe("true");
    expect(again.json).toEqual(first.json);

    const count = async () =>
      (await query<{ n: number }>("SELECT count(*)::int AS n FROM billing.portal_sessions"))[0]?.n;
    const before = await count();
    for (const [refused, code, param] of [
      [{}, "parameter_missing", "customer"],
      [{ customer: "" }, "parameter_invalid", "customer"],
      [{ customer: "cus_nobody" }, "resource_missing", "customer"],
      [{ customer: "cus_a", return_url: "javascript:alert(1)" }, "url_invalid", "return_url"],
      [{ customer: "cus_a", return_url: "http://shop.example" }, "url_insecure", "return_url"],
      [
        { customer: "cus_a", features: { subscription_cancel: {} } },
        "parameter_missing",
        "features.subscription_cancel.enabled",
      ],
      [{ customer: "cus_a", extra: 1 }, "parameter_unknown", "extra"],
    ] as const) {
      const answer = await shop.call("/v1/portal_sessions", refused);
      expect(answer.status, JSON.stringify(refused)).toBe(400);
      expect(expectErrorShape(answer.json)).toMatchObject({ code, param });
    }
    // Another merchant's customer of the same name has nothing of this merchant.
    expect(await count()).toBe(before);
  });
});

describe("the portal's JSON", () => {
  it("shows one customer's mandates and subscriptions of one merchant, and nothing else", async () => {
    const session = await portalSession(shop, { customer: "cus_a" });
    const view = await page(session.url, "/session");
    expect(view.status, view.text).toBe(200);
    expect(view.headers.get("cache-control")).toBe("no-store");
    expect(view.json).toMatchObject({ object: "portal", livemode: false, customer: "cus_a" });
    expect(view.json.mandates.map((m: { id: string }) => m.id).sort()).toEqual(
      [subA.mandate, plainMandate].sort(),
    );
    expect(view.json.subscriptions.map((s: { id: string }) => s.id)).toEqual([subA.id]);
    const [sub] = view.json.subscriptions;
    expect(sub).toMatchObject({
      status: "active",
      product_name: "Team",
      amount_decimal: "10",
      token: "USDC",
      cancel_at_period_end: false,
      cancelable: true,
      next_charge: { amount_decimal: "10", at: sub.current_period.end },
    });
    const plain = view.json.mandates.find((m: { id: string }) => m.id === plainMandate);
    expect(plain).toMatchObject({ status: "active", cap_decimal: "25", subscription: null });
    expect(plain.recent_charges).toHaveLength(1);
    expect(plain.recent_charges[0]).toMatchObject({ status: "succeeded", amount_decimal: "5" });
    expect(plain.holds).toEqual([
      expect.objectContaining({ charge: plain.recent_charges[0].id, amount_decimal: "5" }),
    ]);

    // Another customer's subscription of the same merchant, another merchant's of the same customer
    // reference, and an id that cannot be one: 404, and nothing changed.
    for (const id of [subB.id, foreign.id]) {
      const refused = await page(session.url, `/subscriptions/${id}/cancel`, {});
      expect(refused.status).toBe(404);
      expect(expectErrorShape(refused.json).code).toBe("resource_missing");
    }
    expect((await page(session.url, "/subscriptions/sub_nope/cancel", {})).status).toBe(404);
    expect((await subscription(shop, subB.id)).cancel_at_period_end).toBe(false);
    expect((await subscription(other, foreign.id)).cancel_at_period_end).toBe(false);
  });

  it("refuses an unknown and an expired link, as JSON and as a page", async () => {
    const session = await portalSession(shop, { customer: "cus_b" });
    expect((await page(session.url, "/session")).status).toBe(200);
    // The service's clock cannot be moved from outside: the session is aged instead.
    await query("UPDATE billing.portal_sessions SET expires_at = now() - interval '1 second' WHERE id = $1", [
      session.id,
    ]);
    const expired = await page(session.url, "/session");
    expect(expired.status).toBe(404);
    expect(expectErrorShape(expired.json).code).toBe("portal_session_expired");
    const cancel = await page(session.url, `/subscriptions/${subB.id}/cancel`, {});
    expect(expectErrorShape(cancel.json).code).toBe("portal_session_expired");
    expect((await subscription(shop, subB.id)).cancel_at_period_end).toBe(false);
    const html = await fetch(session.url);
    expect(html.status).toBe(404);
    expect(await html.text()).toContain("Link not valid");

    const unknown = `${session.url.slice(0, session.url.lastIndexOf("/"))}/${"A".repeat(32)}`;
    const missing = await page(unknown, "/session");
    expect(expectErrorShape(missing.json).code).toBe("portal_session_not_found");
    expect((await fetch(unknown)).status).toBe(404);
  });
});

const heading = (p: Page, name: string | RegExp) => p.getByRole("heading", { name });

describe("the hosted portal page", () => {
  it("lists the customer's payments and cancels a subscription at period end, raising the API's events", async () => {
    const session = await portalSession(shop, {
      customer: "cus_a",
      return_url: "https://shop.example/account",
    });
    const browser = await openPage(session.url, null);
    await heading(browser, /Your payments to Merchant/).waitFor();
    const team = browser.getByRole("region", { name: "Team" });
    await team.waitFor();
    const teamText = await team.textContent();
    expect(teamText).toContain("10 USDC per month");
    expect(teamText).toContain("Next charge10 USDC on");
    expect(teamText).toContain("Up to 10 USDC per month");
    const plain = browser.getByRole("region", { name: /Payments to Merchant/ }).first();
    const plainText = await plain.textContent();
    expect(plainText).toContain("Up to 25 USDC per month");
    expect(plainText).toContain("5 USDC · paid, held in escrow until");
    expect(await browser.locator(".card").textContent()).toContain("Test mode");
    expect(await browser.getByRole("link", { name: /Return to Merchant/ }).getAttribute("href")).toBe(
      "https://shop.example/account",
    );
    // Nothing of the other customer or the other merchant.
    expect(await browser.getByRole("region", { name: "Solo" }).count()).toBe(0);
    expect(await browser.getByRole("region", { name: "Elsewhere" }).count()).toBe(0);
    await shot(browser, "list");

    await team.getByRole("button", { name: "Cancel subscription" }).click();
    await team.getByText(/Cancel Team\? It stays active until/).waitFor();
    await shot(browser, "confirm-cancel");
    // "Keep it" asks nothing of the service.
    await team.getByRole("button", { name: "Keep it" }).click();
    expect((await subscription(shop, subA.id)).cancel_at_period_end).toBe(false);
    await team.getByRole("button", { name: "Cancel subscription" }).click();
    await team.getByRole("button", { name: "Yes, cancel" }).click();
    await browser
      .getByRole("status")
      .filter({ hasText: /Your Team subscription ends on/ })
      .waitFor();
    await shot(browser, "canceled");
    expect(await team.getByRole("button", { name: "Cancel subscription" }).count()).toBe(0);
    expect(await team.textContent()).toContain("Ends");

    const canceling = await subscription(shop, subA.id);
    expect(canceling).toMatchObject({
      status: "active",
      cancel_at_period_end: true,
      cancellation_source: "portal",
    });
    const [updated] = await shop.waitForEvents("subscription.updated", 1, (o) => o.id === subA.id);
    expect(updated?.data.object).toMatchObject({ cancel_at_period_end: true, cancellation_source: "portal" });
    // The period's end: canceled as a cancellation asked through the API would be, by the customer.
    await shop.advance(MONTH);
    const [ended] = await shop.waitForEvents("subscription.canceled", 1, (o) => o.id === subA.id);
    expect(ended?.data.object).toMatchObject({
      status: "canceled",
      cancellation_reason: "requested",
      cancellation_source: "portal",
    });
    const invoices = await shop.call(`/v1/invoices?subscription=${subA.id}`);
    expect(invoices.json.data).toHaveLength(1);

    // Reloaded: the canceled subscription is gone. Its mandate stays authorized on chain (canceling
    // never revokes; the customer can), shown beside the plain one.
    await browser.reload();
    const mandates = browser.getByRole("region", { name: /Payments to Merchant/ });
    await expect.poll(() => mandates.count()).toBe(2);
    expect(await browser.getByRole("region", { name: "Team" }).count()).toBe(0);
    expect(await mandates.allTextContents()).toEqual(
      expect.arrayContaining([expect.stringContaining("Up to 10 USDC per month")]),
    );
    await browser.close();
    expectNoProblems();
  });

  it("offers no cancel where the session does not allow it, and its API refuses it", async () => {
    const session = await portalSession(shop, {
      customer: "cus_b",
      features: { subscription_cancel: { enabled: false } },
    });
    const browser = await openPage(session.url, null);
    const solo = browser.getByRole("region", { name: "Solo" });
    await solo.waitFor();
    expect(await solo.getByRole("button", { name: "Cancel subscription" }).count()).toBe(0);
    const refused = await page(session.url, `/subscriptions/${subB.id}/cancel`, {});
    expect(refused.status).toBe(400);
    expect(expectErrorShape(refused.json).code).toBe("portal_feature_disabled");
    expect((await subscription(shop, subB.id)).cancel_at_period_end).toBe(false);
    await browser.close();
    expectNoProblems();
  });

  it("offers revocation of the customer's own mandates only, and refuses a malformed signature (one error shape)", async () => {
    const session = await portalSession(shop, { customer: "cus_a" });
    const view = await page(session.url, "/session");
    expect(view.json.features.mandate_revoke.enabled).toBe(true);
    const plain = view.json.mandates.find((m: { id: string }) => m.id === plainMandate);
    expect(plain.revocable).toBe(true);
    // Another customer's or merchant's mandate is 404 before anything else is asked.
    for (const id of [subB.mandate, foreign.mandate]) {
      const refused = await page(session.url, `/mandates/${id}/revocation`);
      expect(refused.status).toBe(404);
      expect(expectErrorShape(refused.json).code).toBe("resource_missing");
    }
    const body = { deadline: "1", signature: `0x${"11".repeat(65)}` };
    expect((await page(session.url, `/mandates/${subB.mandate}/revocation`, body)).status).toBe(404);
    // A malformed signature is refused before anything is read from the chain.
    const malformed = await page(session.url, `/mandates/${plainMandate}/revocation`, {
      deadline: "1",
      signature: "0x12",
    });
    expect(malformed.status).toBe(400);
    expect(expectErrorShape(malformed.json).param).toBe("signature");
    // Nothing was sent for any of them.
    const onchainIds = [
      (await shop.call(`/v1/mandates/${plainMandate}`)).json.onchain_id,
      (await shop.call(`/v1/mandates/${subB.mandate}`)).json.onchain_id,
      (await other.call(`/v1/mandates/${foreign.mandate}`)).json.onchain_id,
    ].map((id) => `%${String(id).toLowerCase()}:revoke`);
    const sent = await query("SELECT 1 FROM billing.relayer_transactions WHERE action LIKE ANY ($1)", [
      onchainIds,
    ]);
    expect(sent).toHaveLength(0);
  });

  it("revokes a mandate from the page with the mandate's wallet, without gas, and the subscription ends", async () => {
    const sub = await signedSubscription(shop, "cus_r", "Revocable", "3");
    const session = await portalSession(shop, { customer: "cus_r" });
    // The test helper signed as the mandate's test wallet: the same key signs the revocation.
    const wallet = new TestWallet({ key: testWalletKey(sub.mandate) });
    const browser = await openPage(session.url, wallet);
    const item = browser.getByRole("region", { name: "Revocable" });
    await item.getByRole("button", { name: "Revoke" }).click();
    await item.getByText(/Revoke this authorization\?/).waitFor();
    await shot(browser, "confirm-revoke");
    await item.getByRole("button", { name: "Sign to revoke" }).click();
    await browser
      .getByRole("status")
      .filter({ hasText: /Revoked: .* can no longer collect payments/ })
      .waitFor({ timeout: 60_000 });
    await shot(browser, "revoked");
    const signed = wallet.calls
      .filter((c) => c.method === "eth_signTypedData_v4")
      .map((c) => JSON.parse(String(c.params[1])) as { primaryType: string });
    expect(signed.map((t) => t.primaryType)).toEqual(["Revoke"]);
    expect(wallet.methods()).not.toContain("eth_sendTransaction");
    expect((await shop.call(`/v1/mandates/${sub.mandate}`)).json.status).toBe("revoked");
    await shop.waitForEvents("mandate.revoked", 1, (o) => o.id === sub.mandate);
    await shop.advance(MONTH);
    const [ended] = await shop.waitForEvents("subscription.canceled", 1, (o) => o.id === sub.id);
    expect(ended?.data.object).toMatchObject({ cancellation_reason: "mandate_revoked" });
    await browser.close();
    expectNoProblems();
  });
});
