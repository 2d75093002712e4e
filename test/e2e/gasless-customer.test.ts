/**
 * The product's central promise on Circle's real USDC: a customer whose wallet holds USDC and no ETH
 * at all signs once on the hosted page (the terms and USDC's own EIP-2612 permit, in the domain of its
 * `name()` and `version()`, since USDC has no EIP-5267 `eip712Domain()`), and is then charged month after
 * month, with holds released to the merchant and one returned, without ever paying gas: the customer's
 * ETH balance is 0 before and after, and its account nonce stays 0 (no transaction was ever sent from it).
 */
import { parseUnits } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import { hostedPageBrowser, TestWallet } from "./browser-wallet.ts";
import { chainDriver } from "./chain-driver.ts";
import { merchantOnTestChain } from "./helpers.ts";

const { openPage, button, expectNoProblems } = hostedPageBrowser("test-results/gasless-customer");

const DAY = 86_400;
const HOLD = 3_600;
const usdc = (amount: string) => parseUnits(amount, 6);

describe("a customer with USDC and no ETH", () => {
  it("signs once on the page and is charged every month, with releases and a return, paying no gas", async () => {
    const driver = chainDriver(31337);
    const m = await merchantOnTestChain();
    const key = generatePrivateKey();
    const customer = privateKeyToAccount(key).address;
    await driver.mint(customer, usdc("200"));
    const ethBalance = () => driver.client.getBalance({ address: customer });
    const sentTransactions = () => driver.client.getTransactionCount({ address: customer });
    expect(await ethBalance()).toBe(0n);
    expect(await sentTransactions()).toBe(0);

    const opened = await m.call("/v1/mandates", {
      cap_decimal: "25",
      period: "month",
      customer: "cus_gasless",
      reference: "plan_monthly",
    });
    expect(opened.status, opened.text).toBe(200);
    const mandate = opened.json as { id: string; authorization_url: string };

    // The hosted page: connect, sign the terms and USDC's permit, nothing else.
    const wallet = new TestWallet({ key });
    const page = await openPage(mandate.authorization_url, wallet);
    await button(page, "Connect wallet").click();
    await button(page, "Sign and authorize").click();
    await page.getByRole("heading", { name: "You're all set" }).waitFor({ timeout: 60_000 });
    const signed = wallet.calls
      .filter((c) => c.method === "eth_signTypedData_v4")
      .map(
        (c) =>
          JSON.parse(String(c.params[1])) as {
            primaryType: string;
            domain: { name: string; version: string; verifyingContract: string };
          },
      );
    expect(signed.map((s) => s.primaryType)).toEqual(["Terms", "Permit"]);
    expect(signed[1]?.domain).toMatchObject({ name: "USD Coin", version: "2" });
    expect(signed[1]?.domain.verifyingContract.toLowerCase()).toBe(driver.usdc.toLowerCase());
    expect(wallet.methods()).not.toContain("eth_sendTransaction");
    await page.close();
    await m.waitForEvents("mandate.authorized", 1, (o) => o.id === mandate.id);

    const chargeSettled = async (amount: string) => {
      const created = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: amount });
      expect(created.status, created.text).toBe(200);
      const id = created.json.id as string;
      await m.waitForEvents("charge.succeeded", 1, (o) => o.id === id);
      return id;
    };
    const chargeOf = async (id: string) => (await m.call(`/v1/charges/${id}`)).json;
    const released = async (id: string) => {
      await m.advance(HOLD + 1);
      await m.waitForEvents("charge.released", 1, (o) => o.id === id);
      expect((await chargeOf(id)).status).toBe("released");
    };

    // Month 1: charged, held an hour, released to the merchant by the service.
    const first = await chargeSettled("25");
    await released(first);

    // Month 2: charged, then returned to the customer during its hold.
    expect((await m.advance(31 * DAY)).status).toBe(200);
    const second = await chargeSettled("25");
    const returning = await m.call(`/v1/charges/${second}/return`, {});
    expect(returning.status, returning.text).toBe(200);
    await m.waitForEvents("charge.returned", 1, (o) => o.id === second);

    // Month 3: charged and released again.
    expect((await m.advance(31 * DAY)).status).toBe(200);
    const third = await chargeSettled("20");
    await released(third);

    await waitFor(async () => (await driver.balanceOf(m.payoutAddress as `0x${string}`)) === usdc("45"), {
      timeoutMs: 30_000,
      intervalMs: 100,
      what: "the merchant to hold both released charges",
    });
    expect(await driver.balanceOf(customer)).toBe(usdc("155"));
    expect(await ethBalance()).toBe(0n);
    expect(await sentTransactions()).toBe(0);
    expectNoProblems();
  });
});
