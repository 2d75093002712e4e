/**
 * The console's Balance and Reports pages in headless Chromium against the real stack, with a read-only
 * key: a payment swept into its hold shows as pending on the Balance page, and the month of its sweep
 * closes on the Reports page with the figures `GET /v1/reports/period` gives.
 * Screenshots go to test-results/console/.
 */
import { describe, expect, it } from "vitest";
import { consoleBrowser, heading, nav, signIn } from "./console-driver.ts";
import { api, cli, merchantOnTestChain, query } from "./helpers.ts";
import { relaySettled } from "./settle.ts";

const { openConsole, shot, button, expectNoProblems } = consoleBrowser();

describe("merchant console balance and reports (Chromium)", () => {
  it("shows the balance and closes a month, read-only", async () => {
    const m = await merchantOnTestChain();
    const created = await m.call("/v1/payments", { amount_decimal: "6.25" });
    expect(created.status, created.text).toBe(200);
    expect(
      (await m.call(`/v1/test/payments/${created.json.id}/pay`, { amount_decimal: "6.25" })).status,
    ).toBe(200);
    await m.waitForEvents("payment.paid", 1, (o) => o.id === created.json.id);
    await relaySettled(31337);
    const balance = (await m.call("/v1/balance")).json.amounts[0];
    expect(balance).toMatchObject({ pending_decimal: "6.25", chain: 31337 });
    const [swept] = await query<{ created: string }>(
      "SELECT created::text FROM billing.balance_transactions WHERE source_id = $1",
      [created.json.id],
    );
    const month = new Date(Number(swept?.created) * 1000).toISOString().slice(0, 7);
    const [, restricted] = (
      await cli("keys", "create", "--merchant", m.merchantId, "--mode", "test", "--restricted")
    ).split("\t");
    expect(restricted).toMatch(/^rk_test_/);

    const { page } = await openConsole();
    await heading(page, "Sign in to the console").waitFor();
    await signIn(page, String(restricted));
    await heading(page, "Overview").waitFor();
    await nav(page, "Balance").click();
    await heading(page, "Balance").waitFor();
    const row = page.locator(`tr[data-token="${balance.token_address}"]`);
    await expect.poll(() => row.locator('[data-amount="pending"]').textContent()).toBe("6.25");
    expect(await row.locator('[data-amount="available"]').textContent()).toBe(balance.available_decimal);
    await shot(page, "balance");

    await nav(page, "Reports").click();
    await heading(page, "Reports").waitFor();
    await page.getByLabel("Month").fill(month);
    await page.getByLabel("Time zone").fill("UTC");
    await button(page, "Show the month").click();
    const report = (await api(`/v1/reports/period?month=${month}&time_zone=UTC`, { key: m.key })).json;
    await page.getByRole("heading", { name: `Money, ${month} (UTC)` }).waitFor();
    await expect
      .poll(() => page.locator('[data-amount="closing"]').first().textContent())
      .toBe(report.balances[0].closing_pending);
    expect(report.balances[0].payments_held).toBe("6250000");
    // Any range downloads, streamed by the server: here every balance transaction, as CSV.
    const link = page.getByRole("link", { name: "Download CSV" });
    const href = (await link.getAttribute("href")) ?? "";
    expect(href).toBe("/v1/balance_transactions?format=csv");
    const csv = await page.evaluate(
      async (url) => (await fetch(url, { credentials: "same-origin" })).text(),
      href,
    );
    expect(csv.split("\r\n")[0]).toMatch(/^id,type,reverses,amount,/);
    expect(csv).toContain(created.json.id);
    const [saved] = await Promise.all([page.waitForEvent("download"), link.click()]);
    expect(saved.suggestedFilename()).toBe("balance_transactions.csv");
    await shot(page, "reports");
    await page.close();
    expectNoProblems();
  });
});
