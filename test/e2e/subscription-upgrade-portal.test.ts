/**
 * The upgrade above the cap from end to end on the real stack (Circle's USDC, headless Chromium): the
 * plan change waits as a pending update and warns at once with the authorization_url; the merchant asks
 * for the higher cap; the customer finds it on the portal, follows "Review and sign" to the mandate's
 * authorization page and signs the raise without gas; the cap in force rises on chain, the pending update
 * applies, and the next invoice carries the prorations and the new price, charged once within the new
 * cap.
 */
import { describe, expect, it } from "vitest";
import { testWalletKey } from "../../service/mandates/terms.ts";
import { hostedPageBrowser, TestWallet } from "./browser-wallet.ts";
import { merchantOnTestChain, query } from "./helpers.ts";

const { openPage, button, shot, expectNoProblems } = hostedPageBrowser("test-results/subscription-upgrade");

const DAY = 86_400;

interface Line {
  readonly kind: string;
  readonly amount_decimal: string;
}

describe("an upgrade above the cap", () => {
  it("waits for the customer's higher cap, signed from the portal, then bills the prorations once within it", async () => {
    const m = await merchantOnTestChain();
    const basic = (await m.call("/v1/prices", { product_name: "Basic", amount_decimal: "10", chain: 31337 }))
      .json;
    const pro = (await m.call("/v1/prices", { product_name: "Pro", amount_decimal: "20", chain: 31337 }))
      .json;
    const created = await m.call("/v1/subscriptions", {
      customer: "cus_upgrade",
      price: basic.id,
      cap_decimal: "15",
    });
    expect(created.status, created.text).toBe(200);
    const sub = created.json as { id: string; mandate: string; authorization_url: string };
    await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "200" });
    expect((await m.call(`/v1/test/mandates/${sub.mandate}/authorize`, {})).status).toBe(200);
    await m.waitForEvents("invoice.paid", 1, (o) => o.subscription === sub.id && o.period === 0);
    await m.advance(10 * DAY);

    // Above the cap of 15: a pending update, and the warning at once with the link to sign.
    const changed = await m.call(`/v1/subscriptions/${sub.id}`, { price: pro.id });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.json).toMatchObject({ price: basic.id, pending_update: { price: pro.id } });
    const [warning] = await m.waitForEvents(
      "schedule.upcoming_charge_at_risk",
      1,
      (o) => o.subscription === sub.id,
    );
    expect(warning?.data.object).toMatchObject({
      reason: "mandate_cap_exceeded",
      cap_decimal: "15",
      authorization_url: sub.authorization_url,
    });

    // The merchant asks for a cap that covers it; the customer signs it from the portal.
    const raise = await m.call(`/v1/mandates/${sub.mandate}`, { cap_decimal: "30" });
    expect(raise.status, raise.text).toBe(200);
    expect(raise.json).toMatchObject({ cap_decimal: "15", pending_update: { cap_decimal: "30" } });
    const session = await m.call("/v1/portal_sessions", { customer: "cus_upgrade" });
    expect(session.status, session.text).toBe(200);
    // The test helper signed as the mandate's test wallet: the same key signs the raise.
    const wallet = new TestWallet({ key: testWalletKey(sub.mandate) });
    const portal = await openPage(session.json.url, wallet);
    const item = portal.getByRole("region", { name: "Basic" });
    const review = item.getByRole("link", { name: /Review and sign/ });
    await review.waitFor({ timeout: 30_000 });
    await shot(portal, "raise-waiting");
    const href = await review.getAttribute("href");
    expect(href).toBe(sub.authorization_url);
    await review.click();
    await portal
      .getByText("asks to raise your limit from 15 to 30 USDC per month")
      .waitFor({ timeout: 30_000 });
    await button(portal, "Connect wallet").click();
    await button(portal, "Sign and authorize").click();
    await portal.getByRole("heading", { name: "You're all set" }).waitFor({ timeout: 60_000 });
    await portal.close();
    expect(wallet.methods()).not.toContain("eth_sendTransaction");

    await m.waitForEvents("mandate.cap_changed", 1, (o) => o.id === sub.mandate && o.cap_decimal === "30");
    const [applied] = await m.waitForEvents("subscription.pending_update_applied", 1, (o) => o.id === sub.id);
    expect(applied?.data.object).toMatchObject({ price: pro.id, pending_update: null });

    // The boundary: the new price and the prorations on one invoice, charged once, within 30.
    const now = (await m.advance(1)).json.now as number;
    const current = (await m.call(`/v1/subscriptions/${sub.id}`)).json;
    await m.advance(current.current_period.end - now + 60);
    const [paid] = await m.waitForEvents(
      "invoice.paid",
      1,
      (o) => o.subscription === sub.id && o.period === 1,
    );
    const invoice = paid?.data.object as { total_decimal: string; lines: Line[]; charge: string };
    expect(invoice.lines.map((l) => l.kind)).toEqual(["price", "proration", "proration"]);
    const total = Number(invoice.total_decimal);
    expect(total).toBeGreaterThan(20);
    expect(total).toBeLessThanOrEqual(30);
    const charges = await query<{ amount: string }>(
      "SELECT amount::text AS amount FROM billing.charges WHERE mandate_id = $1 AND period = 1 AND status <> 'failed'",
      [sub.mandate],
    );
    expect(charges).toHaveLength(1);
    expect((await m.call(`/v1/charges/${invoice.charge}`)).json.amount_decimal).toBe(invoice.total_decimal);
    expectNoProblems();
  });
});
