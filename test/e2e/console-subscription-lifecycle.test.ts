/**
 * The console's subscription detail in headless Chromium against the real stack: a signed subscription
 * in its trial, with a pending update (a price above the mandate's cap) and paused collection, shows all
 * three; Drop and Resume clear them through the API. Screenshot in test-results/console/.
 */
import { describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import { consoleBrowser, heading, nav, signIn, status } from "./console-driver.ts";
import { api, merchantOnTestChain } from "./helpers.ts";

const { openConsole, shot, button, expectNoProblems } = consoleBrowser();

describe("merchant console subscription lifecycle (Chromium)", () => {
  it("shows a trial, a pending update and a pause, and drops and resumes them", async () => {
    const m = await merchantOnTestChain();
    const basic = (await m.call("/v1/prices", { product_name: "Basic", amount_decimal: "10", chain: 31337 }))
      .json;
    const pro = (await m.call("/v1/prices", { product_name: "Pro", amount_decimal: "25", chain: 31337 }))
      .json;
    const sub = (
      await m.call("/v1/subscriptions", {
        customer: "cus_console_trial",
        price: basic.id,
        trial_period_days: 7,
      })
    ).json;
    await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "50" });
    await m.call(`/v1/test/mandates/${sub.mandate}/authorize`, {});
    await waitFor(async () => (await m.call(`/v1/subscriptions/${sub.id}`)).json.status === "trialing", {
      timeoutMs: 20_000,
      what: "trialing",
    });
    const pending = await m.call(`/v1/subscriptions/${sub.id}`, { price: pro.id });
    expect(pending.json.pending_update).toMatchObject({ price: pro.id, amount_due_decimal: "25" });
    await m.call(`/v1/subscriptions/${sub.id}`, { pause_collection: { behavior: "void" } });

    const { page } = await openConsole();
    await heading(page, "Sign in to the console").waitFor();
    await signIn(page, m.key);
    await heading(page, "Overview").waitFor();
    await nav(page, "Subscriptions").click();
    await heading(page, "Subscriptions").waitFor();
    await page.getByLabel("Status").selectOption("trialing");
    await page.getByRole("link", { name: sub.id }).click();
    await heading(page, "Subscription").waitFor();
    await page.getByRole("region", { name: "Pending update" }).getByText(pro.id).waitFor();
    await page.getByRole("region", { name: "Collection paused" }).waitFor();
    await page.getByText("Trial", { exact: true }).waitFor();
    await shot(page, "subscription-lifecycle");

    page.once("dialog", (dialog) => void dialog.accept());
    await button(page, "Drop the pending update").click();
    await expect.poll(() => status(page).textContent()).toBe(`The change waiting on ${sub.id} was dropped.`);
    expect(await page.getByRole("region", { name: "Pending update" }).count()).toBe(0);
    await button(page, "Resume collection").click();
    await expect.poll(() => status(page).textContent()).toBe(`Collection of ${sub.id} resumed.`);
    expect(await page.getByRole("region", { name: "Collection paused" }).count()).toBe(0);
    expect((await api(`/v1/subscriptions/${sub.id}`, { key: m.key })).json).toMatchObject({
      status: "trialing",
      price: basic.id,
      pending_update: null,
      pause_collection: null,
    });
    expectNoProblems();
  });
});
