/**
 * The merchant console at /console in headless Chromium against the real stack: sign-in (a wrong key's
 * message, the mode badge, the key kept nowhere), the overview, a webhook endpoint created against a local
 * receiver with its secret shown once, a test event and its delivery appearing by polling, the event's
 * payload and a replay, sign-out ending the session for /v1 too, and every request on the console's origin;
 * forged cross-site requests from another origin in the same browser; each page's time to interactive.
 * Screenshots of each page go to test-results/console/ (a test artifact, gitignored).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { consoleBrowser, heading, nav, signIn, status } from "./console-driver.ts";
import {
  api,
  CONSOLE_SESSION_COOKIE,
  cli,
  merchantOnTestChain,
  newMerchantWithKey,
  stack,
} from "./helpers.ts";
import { startReceiver } from "./receiver.ts";

const { openConsole, shot, button, expectNoProblems } = consoleBrowser();

let receiver: Awaited<ReturnType<typeof startReceiver>>;
let merchant: Awaited<ReturnType<typeof merchantOnTestChain>>;

beforeAll(async () => {
  receiver = await startReceiver();
  merchant = await merchantOnTestChain();
});

afterAll(async () => {
  await receiver?.close();
});

describe("merchant console at /console (Chromium)", () => {
  it("is served with a strict CSP and versioned assets", async () => {
    const response = await fetch(`${stack().apiUrl}/console`);
    expect(response.status).toBe(200);
    const csp = response.headers.get("content-security-policy") ?? "";
    for (const directive of [
      "script-src 'self'",
      "style-src 'self'",
      "connect-src 'self'",
      "frame-ancestors 'none'",
    ])
      expect(csp).toContain(directive);
    const html = await response.text();
    expect(html).not.toMatch(/<script>|<style>|style="/);
    const script = html.match(/src="(console\/assets\/console\.js\?v=[^"]+)"/)?.[1];
    expect(script).toBeDefined();
    const asset = await fetch(`${stack().apiUrl}/${script}`);
    expect(asset.status).toBe(200);
    expect(asset.headers.get("cache-control")).toContain("immutable");
    const etag = asset.headers.get("etag") ?? "";
    const again = await fetch(`${stack().apiUrl}/${script}`, { headers: { "if-none-match": etag } });
    expect(again.status).toBe(304);
  });

  it("refuses a wrong or revoked key with the API's message, and shows a live key's mode", async () => {
    const { page } = await openConsole();
    await heading(page, "Sign in to the console").waitFor();
    const refusedWith = async (key: string) => {
      const expected = await api("/console/session", { key: null, body: { api_key: key } });
      expect(expected.status).toBe(401);
      await signIn(page, key);
      await expect.poll(() => status(page).textContent()).toBe(expected.json.error.message);
      expect(await page.getByLabel("API key").inputValue()).toBe("");
    };
    await refusedWith(`sk_test_${"x".repeat(40)}`);
    await shot(page, "sign-in-error");
    const revoked = (await cli("keys", "create", "--merchant", merchant.merchantId, "--mode", "test")).split(
      "\t",
    );
    await cli("keys", "revoke", String(revoked[0]));
    await refusedWith(String(revoked[1]));

    const live = await newMerchantWithKey("live");
    await signIn(page, live.key);
    await page.getByText("Live mode", { exact: true }).waitFor();
    await heading(page, "Overview").waitFor();
    await page.close();
    expectNoProblems();
  });

  it("signs in, shows the overview, manages a webhook endpoint, replays an event and signs out", async () => {
    const { page, requests } = await openConsole();
    const origin = stack().apiUrl;

    // Sign in: the mode badge, and the key is kept nowhere in the browser.
    await heading(page, "Sign in to the console").waitFor();
    await shot(page, "sign-in");
    await signIn(page, merchant.key);
    await page.getByText("Test mode", { exact: true }).waitFor();
    await heading(page, "Overview").waitFor();
    const kept = await page.evaluate(
      (key) => ({
        dom: document.documentElement.outerHTML.includes(key),
        local:
          JSON.stringify({ ...localStorage }).includes(key) ||
          JSON.stringify({ ...sessionStorage }).includes(key),
        inputs: Array.from(document.querySelectorAll("input")).some((input) => input.value.includes(key)),
      }),
      merchant.key,
    );
    expect(kept).toEqual({ dom: false, local: false, inputs: false });
    const cookies = await page.context().cookies(origin);
    const sessionCookie = cookies.find((cookie) => cookie.name === CONSOLE_SESSION_COOKIE);
    expect(sessionCookie?.httpOnly).toBe(true);

    // Overview: chain 31337 with its flags, the payout address, recent events.
    await page.locator('tr[data-chain="31337"]').waitFor();
    await page.getByText(merchant.payoutAddress).waitFor();
    await page.getByRole("heading", { name: "Recent events" }).waitFor();
    await shot(page, "overview");
    await page.setViewportSize({ width: 390, height: 800 });
    await shot(page, "overview-phone");
    await page.setViewportSize({ width: 760, height: 1000 });

    // Webhooks: create an endpoint pointed at the local receiver; its secret is shown once.
    await nav(page, "Webhooks").click();
    await heading(page, "Webhooks").waitFor();
    await page.getByLabel("Endpoint URL").fill(receiver.url);
    await page.getByLabel("payment.paid", { exact: true }).check();
    await button(page, "Add endpoint").click();
    const secret = page.getByTestId("secret");
    await expect.poll(() => secret.textContent()).toMatch(/^whsec_/);
    await page.getByText("it will not be shown again").waitFor();
    const shownSecret = await secret.textContent();
    await button(page, "Copy").click();
    await button(page, "Copied").waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(shownSecret);
    await shot(page, "webhooks-secret");
    await nav(page, "Events").click();
    await heading(page, "Events").waitFor();
    await nav(page, "Webhooks").click();
    await page.getByRole("listitem", { name: `Endpoint ${receiver.url}` }).waitFor();
    expect(await page.getByTestId("secret").count()).toBe(0);
    expect(await page.locator("body").textContent()).not.toContain("whsec_");

    // Send a test event: its delivery and attempt appear by polling.
    const endpoint = page.getByRole("listitem", { name: `Endpoint ${receiver.url}` });
    // From the keyboard: focus the button and press Enter.
    await endpoint.getByRole("button", { name: "Send test event" }).press("Enter");
    const succeeded = endpoint.locator('.delivery[data-status="succeeded"]');
    await expect.poll(() => succeeded.count(), { timeout: 20_000 }).toBe(1);
    await expect.poll(() => succeeded.first().textContent()).toContain("Attempt 1: HTTP 200");
    expect(receiver.received.map((r) => r.event.type)).toEqual(["webhook.test"]);
    const testEventId = receiver.received[0]?.event.id ?? "";
    await shot(page, "webhooks-delivery");

    // Events: filter by type, open the webhook.test event, its payload, replay it.
    await nav(page, "Events").click();
    await page.getByLabel("Type").selectOption("webhook.test");
    await page.getByRole("link", { name: "webhook.test" }).first().click();
    await heading(page, "webhook.test").waitFor();
    expect(decodeURIComponent(new URL(page.url()).hash)).toBe(`#/events/${testEventId}`);
    const payload = page.getByLabel("Event payload");
    await expect.poll(() => payload.textContent()).toContain(`"id": "${testEventId}"`);
    expect(JSON.parse((await payload.textContent()) ?? "")).toMatchObject({
      id: testEventId,
      type: "webhook.test",
    });
    await shot(page, "event-detail");
    await button(page, "Replay").click();
    await expect.poll(() => status(page).textContent()).toBe("Replayed: 1 new delivery.");
    await nav(page, "Webhooks").click();
    await expect
      .poll(() => endpoint.locator('.delivery[data-status="succeeded"]').count(), { timeout: 20_000 })
      .toBe(2);
    expect(receiver.received.map((r) => r.event.id)).toEqual([testEventId, testEventId]);
    await shot(page, "webhooks-replayed");

    // Rotate (a new secret, shown once), disable and enable again, delete.
    await endpoint.getByRole("button", { name: "Rotate secret" }).click();
    await expect.poll(() => page.getByTestId("secret").textContent()).toMatch(/^whsec_/);
    expect(await page.getByTestId("secret").textContent()).not.toBe(shownSecret);
    await button(page, "I have stored it").click();
    expect(await page.getByTestId("secret").count()).toBe(0);
    await endpoint.getByRole("button", { name: "Disable" }).click();
    await endpoint.getByRole("button", { name: "Enable" }).waitFor();
    expect(await endpoint.getByRole("button", { name: "Send test event" }).isDisabled()).toBe(true);
    await endpoint.getByRole("button", { name: "Enable" }).click();
    await endpoint.getByRole("button", { name: "Disable" }).waitFor();
    page.once("dialog", (dialog) => void dialog.accept());
    await endpoint.getByRole("button", { name: "Delete" }).click();
    await page.getByText("No endpoints yet.").waitFor();
    expect(receiver.received).toHaveLength(2);

    // Sign out: the sign-in page, and the old cookie no longer opens /v1.
    await button(page, "Sign out").click();
    await heading(page, "Sign in to the console").waitFor();
    const after = await fetch(`${origin}/v1/webhook_endpoints`, {
      headers: { cookie: `${CONSOLE_SESSION_COOKIE}=${sessionCookie?.value ?? ""}` },
    });
    expect(after.status).toBe(401);
    expect(((await after.json()) as { error: { code: string } }).error.code).toBe("console_session_invalid");
    await shot(page, "signed-out");

    // Nothing left the console's origin.
    expect(requests.length).toBeGreaterThan(5);
    expect(requests.filter((url) => new URL(url).origin !== origin && url !== "about:blank")).toEqual([]);
    await page.close();
    expectNoProblems();
  });

  it("refuses forged cross-site requests from another origin in the same browser, changing nothing", async () => {
    const { page } = await openConsole();
    const origin = stack().apiUrl;
    await heading(page, "Sign in to the console").waitFor();
    await signIn(page, merchant.key);
    await heading(page, "Overview").waitFor();
    const endpointsBefore = (await api("/v1/webhook_endpoints", { key: merchant.key })).json.data.length;

    // Another site (127.0.0.2 is another site than 127.0.0.1) tries, with the browser's cookies, what a
    // JSON-less form or a no-cors fetch can send: create an endpoint, send a test event, sign out.
    const attacker = createServer((_, response) => {
      response.writeHead(200, { "content-type": "text/html" });
      response.end("<!doctype html><title>elsewhere</title>");
    });
    await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.2", resolve));
    const { port } = attacker.address() as AddressInfo;
    const elsewhere = await page.context().newPage();
    await elsewhere.goto(`http://127.0.0.2:${port}/`);
    const statuses = await elsewhere.evaluate(async (target) => {
      const forge = (path: string, body: string, type: string) =>
        fetch(`${target}${path}`, {
          method: "POST",
          mode: "no-cors",
          credentials: "include",
          headers: { "content-type": type },
          body,
        }).then((r) => r.type);
      return Promise.all([
        forge("/v1/webhook_endpoints", JSON.stringify({ url: "http://127.0.0.2:9/x" }), "text/plain"),
        forge(
          "/v1/webhook_endpoints",
          "url=http%3A%2F%2F127.0.0.2%3A9%2Fx",
          "application/x-www-form-urlencoded",
        ),
        forge("/console/session/end", "{}", "text/plain"),
      ]);
    }, origin);
    expect(statuses).toEqual(["opaque", "opaque", "opaque"]);
    await elsewhere.close();
    await new Promise<void>((resolve) => attacker.close(() => resolve()));

    expect((await api("/v1/webhook_endpoints", { key: merchant.key })).json.data).toHaveLength(
      endpointsBefore,
    );
    // Still signed in: the forged sign-out did nothing.
    await page.reload();
    await heading(page, "Overview").waitFor();
    await page.close();
    expectNoProblems();
  });

  it("makes each page interactive within a second on the local stack", async () => {
    const { page } = await openConsole();
    await heading(page, "Sign in to the console").waitFor();
    await signIn(page, merchant.key);
    await heading(page, "Overview").waitFor();
    const pages: Array<[string, string]> = [
      ["overview", "Overview"],
      ["mandates", "Mandates"],
      ["subscriptions", "Subscriptions"],
      ["prices", "Prices and coupons"],
      ["payments", "Payments"],
      ["reconciliation", "Reconciliation"],
      ["webhooks", "Webhooks"],
      ["events", "Events"],
    ];
    const timings: Record<string, { heading_ms: number; network_idle_ms: number }> = {};
    for (const [route, title] of pages) {
      await page.goto(`${stack().apiUrl}/console#/${route}`);
      // A full load of the page's URL: HTML, bundle, the session read, the page's heading; then its
      // first /v1 reads answered and rendered (Playwright's "networkidle" adds a 500 ms quiet window,
      // subtracted here).
      const started = performance.now();
      await page.reload();
      await heading(page, title).waitFor();
      const shown = performance.now();
      await page.waitForLoadState("networkidle");
      timings[route] = {
        heading_ms: Math.round(shown - started),
        network_idle_ms: Math.round(performance.now() - started - 500),
      };
    }
    mkdirSync("test-results/console", { recursive: true });
    writeFileSync("test-results/console/timings.json", `${JSON.stringify(timings, null, 2)}\n`);
    console.log(`console pages interactive (ms): ${JSON.stringify(timings)}`);
    await page.close();
    expectNoProblems();
  });
});
