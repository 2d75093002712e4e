/**
 * The console's Mandates page in headless Chromium against the real stack: a mandate opened from the
 * form, its detail with the authorization URL (copied), the test helpers (fund the test wallet, sign
 * with it, advance the clock), a charge from the form reaching `succeeded` by polling, a raise of the cap
 * shown pending in the detail and the list, and the charge's
 * `charge.succeeded` event on the Events page; then a live key of the same merchant sees none of the test
 * objects and no test helpers. Every request stays on the console's origin. Screenshots go to
 * test-results/console/.
 */
import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { consoleBrowser, heading, nav, signIn, status } from "./console-driver.ts";
import { cli, merchantOnTestChain, stack } from "./helpers.ts";

const { openConsole, shot, button, expectNoProblems } = consoleBrowser();

let merchant: Awaited<ReturnType<typeof merchantOnTestChain>>;

beforeAll(async () => {
  merchant = await merchantOnTestChain();
});

describe("console Mandates page and test helpers (Chromium)", () => {
  it("opens a mandate, signs and funds it with the test helpers, charges it; a live key sees none of it", async () => {
    const { page, requests } = await openConsole();
    const origin = stack().apiUrl;
    const customer = `cus_console_${randomUUID().slice(0, 8)}`;

    await heading(page, "Sign in to the console").waitFor();
    await signIn(page, merchant.key);
    await page.getByText("Test mode", { exact: true }).waitFor();

    // The list and the create form; an API error shows its message.
    await nav(page, "Mandates").click();
    await heading(page, "Mandates").waitFor();
    await page.getByText("No mandates.").waitFor();
    await page.getByLabel("Cap per period").fill("not-a-number");
    await page.getByLabel("Customer", { exact: true }).fill(customer);
    await button(page, "Open mandate").click();
    await expect.poll(() => page.locator("#status.error").count()).toBe(1);
    expect((await status(page).textContent())?.length).toBeGreaterThan(0);

    await page.getByLabel("Cap per period").fill("25");
    await page.getByLabel("Reference (optional)").fill("order-1042");
    await page.getByLabel("Reference (optional)").press("Enter");
    await expect.poll(() => status(page).textContent()).toMatch(/^Mandate mdt_\w+ created/);
    const mandateId = ((await status(page).textContent()) ?? "").split(" ")[1] ?? "";
    const row = page.locator(`tr[data-mandate="${mandateId}"]`);
    await row.waitFor();
    expect(await row.textContent()).toContain(customer);
    expect(await row.textContent()).toContain("pending");
    // Filters: by status and by customer.
    await page.getByLabel("Status").selectOption("active");
    await page.getByText("No mandates.").waitFor();
    await page.getByLabel("Status").selectOption("pending");
    await row.waitFor();
    await page.getByLabel("Filter by customer").fill(customer);
    await page.getByLabel("Filter by customer").press("Enter");
    await row.waitFor();
    await shot(page, "mandates-list");

    // The detail: terms, the authorization URL copied, and the test helpers.
    await row.getByRole("link", { name: mandateId }).click();
    await heading(page, "Mandate").waitFor();
    expect(decodeURIComponent(new URL(page.url()).hash)).toBe(`#/mandates/${mandateId}`);
    const url = page.getByTestId("authorization-url");
    await expect.poll(() => url.textContent()).toMatch(/\/authorize\/[A-Za-z0-9_-]{32}$/);
    await button(page, "Copy URL").click();
    await button(page, "Copied").waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(await url.textContent());
    await page.getByRole("heading", { name: "Test helpers" }).waitFor();

    await page.getByLabel(/^Fund the customer's test wallet/).fill("100");
    await button(page, "Fund test wallet").click();
    await expect
      .poll(() => status(page).textContent(), { timeout: 30_000 })
      .toMatch(/^Funded 0x\w+ with 100 /);
    await button(page, "Authorize with test wallet").click();
    await expect
      .poll(() => status(page).textContent(), { timeout: 30_000 })
      .toMatch(new RegExp(`^Mandate ${mandateId} signed by 0x\\w+: active\\.$`));
    await expect.poll(() => page.getByTestId("mandate-status").textContent()).toBe("active");
    await shot(page, "mandate-detail");

    // A charge above the cap: the API's message; then a charge from the form, succeeded by polling.
    await page.getByLabel(/^Amount/).fill("30");
    await button(page, "Charge").click();
    await expect.poll(() => page.locator("#status.error").count()).toBe(1);
    await page.getByLabel(/^Amount/).fill("19.99");
    await page.getByLabel(/^Amount/).press("Enter");
    await expect.poll(() => status(page).textContent()).toMatch(/^Charge ch_\w+ of 19\.99 \w+: pending\.$/);
    const chargeId = ((await status(page).textContent()) ?? "").split(" ")[1] ?? "";
    const charged = page.locator(`tr[data-charge="${chargeId}"][data-status="succeeded"]`);
    await charged.waitFor({ timeout: 30_000 });
    await shot(page, "mandate-charged");

    // A raise of the cap: pending, shown in the terms and the list, the cap in force unchanged.
    await page.getByLabel(/^New cap/).fill("40");
    await button(page, "Change cap").click();
    await expect
      .poll(() => status(page).textContent())
      .toBe(`Raise of ${mandateId} to 40 USDC requested: the customer signs it at the authorization URL.`);
    await expect
      .poll(() => page.locator("dl.terms").textContent())
      .toMatch(/Pending raise40 USDC per month, asked /);
    expect(await page.locator("dl.terms").textContent()).toContain("Cap25 USDC per month");
    await shot(page, "mandate-pending-raise");
    await page.getByRole("link", { name: "← All mandates" }).click();
    await expect.poll(() => page.getByTestId("pending-cap").textContent()).toBe("raise to 40 pending");
    await row.getByRole("link", { name: mandateId }).click();
    await heading(page, "Mandate").waitFor();

    // The clock helper answers with the chain's new time.
    await page.getByLabel("Advance the test clock (days)").fill("1");
    await button(page, "Advance clock").click();
    await expect
      .poll(() => status(page).textContent(), { timeout: 30_000 })
      .toMatch(/^Chain 31337 clock advanced by 86400 s: now /);

    // The charge.succeeded event on the Events page.
    await nav(page, "Events").click();
    await heading(page, "Events").waitFor();
    await page.getByLabel("Type").selectOption("charge.succeeded");
    await page.getByRole("link", { name: "charge.succeeded" }).first().click();
    await heading(page, "charge.succeeded").waitFor();
    await expect.poll(() => page.getByLabel("Event payload").textContent()).toContain(`"id": "${chargeId}"`);

    // A live key of the same merchant: none of the test objects, no test helpers.
    await button(page, "Sign out").click();
    await heading(page, "Sign in to the console").waitFor();
    const [, liveKey] = (
      await cli("keys", "create", "--merchant", merchant.merchantId, "--mode", "live")
    ).split("\t");
    await signIn(page, String(liveKey));
    await page.getByText("Live mode", { exact: true }).waitFor();
    await nav(page, "Mandates").click();
    await heading(page, "Mandates").waitFor();
    await page.getByText("No mandates.").waitFor();
    expect(await page.locator("body").textContent()).not.toContain(mandateId);
    await page.goto(`${origin}/console#/mandates/${mandateId}`);
    await expect.poll(() => page.locator("#status.error").count()).toBe(1);
    expect(await page.getByRole("heading", { name: "Test helpers" }).count()).toBe(0);
    expect(await page.locator("body").textContent()).not.toContain(customer);

    expect(requests.filter((u) => new URL(u).origin !== origin && u !== "about:blank")).toEqual([]);
    await page.close();
    expectNoProblems();
  });
});
