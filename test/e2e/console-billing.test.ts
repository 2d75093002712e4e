/**
 * The console's billing pages in headless Chromium against the real stack: a payment created from the form
 * (its deposit address and pay page), paid with the test helper and turning `paid` on the polled detail; a
 * price (deactivated and reactivated) and a coupon created from their forms; a subscription found by its
 * status (an older, slower read for all statuses does not replace the filter's answer) and canceled from its
 * detail; the reconciliation page listing the payment's sweep, with a CSV link answering text/csv to the
 * page's cookie (and downloading); every request on the console's origin.
 * Screenshots go to test-results/console/.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { consoleBrowser, heading, nav, readsDone, readsDoneCount, signIn, status } from "./console-driver.ts";
import { api, merchantOnTestChain, stack } from "./helpers.ts";

const { openConsole, shot, button, expectNoProblems } = consoleBrowser();

let merchant: Awaited<ReturnType<typeof merchantOnTestChain>>;

beforeAll(async () => {
  merchant = await merchantOnTestChain();
});

describe("merchant console billing pages (Chromium)", () => {
  it("creates and follows a payment, creates a price and a coupon, and reconciles the sweep", async () => {
    const { page, requests } = await openConsole();
    const origin = stack().apiUrl;
    await heading(page, "Sign in to the console").waitFor();
    await signIn(page, merchant.key);
    await heading(page, "Overview").waitFor();

    // Payments: create one from the form; its detail shows the address and the pay page.
    await nav(page, "Payments").click();
    await heading(page, "Payments").waitFor();
    await page.getByText("No payments.").waitFor();
    await page.getByLabel("Amount", { exact: true }).fill("12.5");
    await page.getByLabel("Reference (optional)").fill("order_42");
    await page.getByLabel("Description (optional)").fill("Console test order");
    await button(page, "Create payment").click();
    await heading(page, "Payment").waitFor();
    const paymentId = decodeURIComponent(new URL(page.url()).hash).replace("#/payments/", "");
    expect(paymentId).toMatch(/^pay_/);
    const created = (await api(`/v1/payments/${paymentId}`, { key: merchant.key })).json;
    await expect.poll(() => page.getByTestId("payment-address").textContent()).toBe(created.address);
    expect(await page.getByTestId("payment-url").textContent()).toBe(created.payment_url);
    expect(await page.getByTestId("payment-status").textContent()).toBe("requires_payment");
    await button(page, "Copy payment url").click();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(created.payment_url);
    await button(page, "Cancel payment").waitFor();
    await shot(page, "payments");

    // The list shows it, and the status filter narrows it.
    await nav(page, "Payments").click();
    await page.locator(`tr[data-payment="${paymentId}"]`).waitFor();
    await page.getByLabel("Status").selectOption("paid");
    await page.getByText("No payments.").waitFor();
    await page.getByLabel("Status").selectOption("requires_payment");
    await page.locator(`tr[data-payment="${paymentId}"]`).waitFor();
    await page.getByRole("link", { name: paymentId }).click();
    await heading(page, "Payment").waitFor();

    // Paid with the test helper: the polled detail turns paid and lists the transfer.
    const paid = await api(`/v1/test/payments/${paymentId}/pay`, {
      key: merchant.key,
      body: { amount_decimal: "12.5" },
    });
    expect(paid.status, paid.text).toBe(200);
    await expect
      .poll(() => page.getByTestId("payment-status").textContent(), { timeout: 30_000 })
      .toBe("paid");
    expect(await button(page, "Cancel payment").count()).toBe(0);
    await expect.poll(() => page.locator("table").last().textContent()).toContain("12.5");
    await shot(page, "payment-paid");

    // Prices and coupons.
    await nav(page, "Prices").click();
    await heading(page, "Prices and coupons").waitFor();
    await page.getByLabel("Product name").fill("Console plan");
    await page.getByLabel("Amount per month").fill("9.99");
    await button(page, "Add price").click();
    await expect.poll(() => status(page).textContent()).toMatch(/^Price price_\S+ created\.$/);
    const priceRow = page.locator("tr[data-price]", { hasText: "Console plan" });
    await priceRow.waitFor();
    expect(await priceRow.textContent()).toContain("9.99");
    await priceRow.getByRole("button", { name: "Deactivate Console plan" }).click();
    await priceRow.getByRole("button", { name: "Reactivate Console plan" }).waitFor();
    expect(await priceRow.textContent()).toContain("inactive");
    await priceRow.getByRole("button", { name: "Reactivate Console plan" }).click();
    await priceRow.getByRole("button", { name: "Deactivate Console plan" }).waitFor();
    await page.getByLabel("Name (optional)").fill("Launch");
    await page.getByLabel("Percent off", { exact: true }).fill("20");
    await page.getByLabel("Duration in months").fill("3");
    await button(page, "Add coupon").click();
    const couponRow = page.locator("tr[data-coupon]", { hasText: "Launch" });
    await couponRow.waitFor();
    expect(await couponRow.textContent()).toContain("20% off");
    const coupons = (await api("/v1/coupons", { key: merchant.key })).json.data;
    expect(coupons).toHaveLength(1);
    expect(coupons[0]).toMatchObject({ name: "Launch", percent_off: 20, duration_in_months: 3 });
    await shot(page, "prices");

    // Subscriptions: one opened through the API (incomplete until authorised), its detail, Cancel now.
    const priceId = (await api("/v1/prices", { key: merchant.key })).json.data[0].id;
    const opened = await api("/v1/subscriptions", {
      key: merchant.key,
      body: { customer: "cus_console", price: priceId },
    });
    expect(opened.status, opened.text).toBe(200);
    const subscriptionId: string = opened.json.id;
    // The unfiltered read answers after the filtered one: the page must keep showing the filter's answer.
    const unfiltered = (url: URL) => url.pathname === "/v1/subscriptions" && !url.searchParams.has("status");
    await page.route(
      unfiltered,
      async (route) => {
        await page.getByText("No subscriptions.").waitFor();
        await route.continue();
      },
      { times: 1 },
    );
    const allStatuses = { pathname: "/v1/subscriptions", lacks: "status" };
    const staleBefore = await readsDoneCount(page, allStatuses);
    await nav(page, "Subscriptions").click();
    await heading(page, "Subscriptions").waitFor();
    await page.getByLabel("Status").selectOption("active");
    // The held-back answer for all statuses has reached the page and the page has acted on it.
    await readsDone(page, allStatuses, staleBefore + 1);
    expect(await page.getByText("No subscriptions.").count()).toBe(1);
    expect(await page.getByRole("link", { name: subscriptionId }).count()).toBe(0);
    await page.getByLabel("Status").selectOption("incomplete");
    await page.getByRole("link", { name: subscriptionId }).click();
    await heading(page, "Subscription").waitFor();
    await page.getByText("cus_console").first().waitFor();
    await page.getByText("No invoices yet.").waitFor();
    await shot(page, "subscriptions");
    page.once("dialog", (dialog) => void dialog.accept());
    await button(page, "Cancel now").click();
    await expect.poll(() => status(page).textContent()).toBe(`${subscriptionId} canceled.`);
    expect(await button(page, "Cancel now").count()).toBe(0);
    expect((await api(`/v1/subscriptions/${subscriptionId}`, { key: merchant.key })).json.status).toBe(
      "canceled",
    );

    // Reconciliation: the payment's sweep, filtered by type; the CSV link answers text/csv.
    await nav(page, "Reconciliation").click();
    await heading(page, "Reconciliation").waitFor();
    await page.getByLabel("Type").selectOption("payment");
    const sweep = page.locator('tr[data-type="payment"]', { hasText: new RegExp(created.address, "i") });
    const entries = { pathname: "/v1/reconciliation" };
    await expect
      .poll(
        async () => {
          const shown = await readsDoneCount(page, entries);
          await button(page, "Show entries").click();
          await readsDone(page, entries, shown + 1);
          return sweep.count();
        },
        { timeout: 30_000, interval: 1000 },
      )
      .toBe(1);
    expect(await sweep.textContent()).toContain("12.5");
    const link = page.getByRole("link", { name: "Download CSV" });
    const href = (await link.getAttribute("href")) ?? "";
    expect(href).toContain("format=csv");
    expect(href).toContain("type=payment");
    expect(href).not.toContain("limit=");
    const csv = await page.evaluate(async (url) => {
      const response = await fetch(url, { credentials: "same-origin" });
      return {
        status: response.status,
        type: response.headers.get("content-type"),
        body: await response.text(),
      };
    }, href);
    expect(csv.status).toBe(200);
    expect(csv.type).toMatch(/^text\/csv/);
    expect(csv.body.toLowerCase()).toContain(String(created.address).toLowerCase());
    const [download] = await Promise.all([page.waitForEvent("download"), link.click()]);
    expect(download.suggestedFilename()).toBe("reconciliation.csv");
    await shot(page, "reconciliation");

    expect(requests.filter((url) => new URL(url).origin !== origin && url !== "about:blank")).toEqual([]);
    await page.close();
    expectNoProblems();
  });
});
