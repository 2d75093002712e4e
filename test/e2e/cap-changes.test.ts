/**
 * Changing a mandate's cap on the real stack (Circle's USDC, a customer holding no ETH):
 * - a raise (`POST /v1/mandates/{id}`) waits as the mandate's pending_update, raises
 *   `mandate.cap_change_requested`, and leaves the old cap chargeable; the customer signs the new terms
 *   and permit once on the hosted page (Chromium), which says the limit goes from 25 to 40 USDC; the
 *   chain records them (`mandate.cap_changed`) and a charge at the new cap succeeds;
 * - a lower is in force at once (a charge above it is refused before anything is sent), put on chain
 *   by the relayer (`lowerCap`), and reported once mined (`mandate.cap_changed`, once).
 */
import { type Hex, parseUnits } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { type PageTypedData, signPageTerms } from "../contract/harness.ts";
import { hostedPageBrowser, TestWallet } from "./browser-wallet.ts";
import { chainDriver } from "./chain-driver.ts";
import { api, merchantOnTestChain } from "./helpers.ts";

const { openPage, button, expectNoProblems } = hostedPageBrowser("test-results/cap-changes");

const DAY = 86_400;
const usdc = (amount: string) => parseUnits(amount, 6);

describe("changing a mandate's cap", () => {
  it("raises it by the customer's signature on the page, and lowers it at once and on chain", async () => {
    const driver = chainDriver(31337);
    const m = await merchantOnTestChain();
    const key = generatePrivateKey();
    const customer = privateKeyToAccount(key).address;
    await driver.mint(customer, usdc("500"));
    const onchain = async (id: Hex) =>
      (await driver.client.readContract({
        address: driver.escrow,
        abi: MandateEscrowAbi,
        functionName: "mandate",
        args: [id],
      })) as { cap: bigint; approvalLeft: bigint; nonce: bigint };

    const opened = await m.call("/v1/mandates", {
      cap_decimal: "25",
      period: "month",
      customer: "cus_raise",
      approval_periods: 12,
    });
    expect(opened.status, opened.text).toBe(200);
    const mandate = opened.json as { id: string; authorization_url: string };
    const wallet = new TestWallet({ key });
    const first = await openPage(mandate.authorization_url, wallet);
    await button(first, "Connect wallet").click();
    await button(first, "Sign and authorize").click();
    await first.getByRole("heading", { name: "You're all set" }).waitFor({ timeout: 60_000 });
    await first.close();
    await m.waitForEvents("mandate.authorized", 1, (o) => o.id === mandate.id);
    const charged = async (amount: string) => {
      const created = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: amount });
      expect(created.status, created.text).toBe(200);
      const id = created.json.id as string;
      await m.waitForEvents("charge.succeeded", 1, (o) => o.id === id);
      return id;
    };

    // The raise: pending, announced, and the old cap still the one charged against.
    const raised = await m.call(`/v1/mandates/${mandate.id}`, { cap_decimal: "40" });
    expect(raised.status, raised.text).toBe(200);
    expect(raised.json).toMatchObject({
      id: mandate.id,
      authorization_url: mandate.authorization_url,
      cap_decimal: "25",
      status: "active",
      pending_update: { cap: "40000000", cap_decimal: "40", approval_decimal: "480" },
    });
    const [requested] = await m.waitForEvents("mandate.cap_change_requested", 1, (o) => o.id === mandate.id);
    expect(requested?.data.object).toMatchObject({
      cap_decimal: "25",
      pending_update: { cap_decimal: "40" },
    });
    const above = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "40" });
    expect(above.status, above.text).toBe(400);
    expect(above.json.error).toMatchObject({ code: "mandate_cap_exceeded" });
    expect(String(above.json.error.message)).toContain("The raise to 40 waits for the customer's signature");
    await charged("25");

    // The customer signs the higher cap on the same page: the change said plainly, signed gaslessly.
    const page = await openPage(mandate.authorization_url, wallet);
    await page.getByRole("heading", { name: "Raise your limit for" }).waitFor({ timeout: 30_000 });
    await page.getByText("asks to raise your limit from 25 to 40 USDC per month").waitFor();
    await button(page, "Connect wallet").click();
    await button(page, "Sign and authorize").click();
    await page.getByRole("heading", { name: "You're all set" }).waitFor({ timeout: 60_000 });
    await page.close();
    const signed = wallet.calls
      .filter((c) => c.method === "eth_signTypedData_v4")
      .map((c) => JSON.parse(String(c.params[1])) as { primaryType: string; message: Record<string, string> })
      .slice(-2);
    expect(signed.map((s) => [s.primaryType, s.message.cap ?? s.message.value])).toEqual([
      ["Terms", "40000000"],
      ["Permit", "480000000"],
    ]);
    expect(signed[0]?.message.nonce).toBe("2");
    expect(wallet.methods()).not.toContain("eth_sendTransaction");
    const [changed] = await m.waitForEvents("mandate.cap_changed", 1, (o) => o.id === mandate.id);
    expect(changed?.data.object).toMatchObject({
      cap_decimal: "40",
      pending_update: null,
      signature_version: 2,
    });
    const onchainId = changed?.data.object.onchain_id as Hex;
    expect((await onchain(onchainId)).cap).toBe(usdc("40"));
    expect((await m.advance(31 * DAY)).status).toBe(200);
    await charged("40");

    // The lower: in force at once, on chain after, reported once.
    const lowered = await m.call(`/v1/mandates/${mandate.id}`, { cap_decimal: "30" });
    expect(lowered.status, lowered.text).toBe(200);
    expect(lowered.json).toMatchObject({ cap_decimal: "30", pending_update: null });
    // Refused by the service at once, in the period already charged at 40 on chain, before anything is sent.
    const refused = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "30.01" });
    expect(refused.status, refused.text).toBe(400);
    expect(refused.json.error).toMatchObject({ code: "mandate_cap_exceeded" });
    await m.waitForEvents("mandate.cap_changed", 1, (o) => o.id === mandate.id && o.cap_decimal === "30");
    expect((await m.advance(31 * DAY)).status).toBe(200);
    // 480 approved, 40 spent: 440 left, capped at 30 × 12 = 360.
    expect(await onchain(onchainId)).toMatchObject({ cap: usdc("30"), approvalLeft: usdc("360"), nonce: 2n });
    const last = await charged("30");
    // A positive marker after the lowering's event: the charge's own event; still two cap changes.
    expect((await m.call(`/v1/charges/${last}`)).json.status).toBe("succeeded");
    const changes = (await m.events("mandate.cap_changed")).filter((e) => e.data.object.id === mandate.id);
    expect(changes.map((e) => e.data.object.cap_decimal).sort()).toEqual(["30", "40"]);
    expect((await m.call(`/v1/mandates/${mandate.id}`)).json).toMatchObject({
      cap_decimal: "30",
      approval_left_decimal: "330",
    });
    expectNoProblems();
  });

  it("cancels a pending raise with the cap in force, announces a raise once, and sets an unsigned mandate's cap at once", async () => {
    const driver = chainDriver(31337);
    const m = await merchantOnTestChain();
    const customer = privateKeyToAccount(generatePrivateKey());
    await driver.mint(customer.address, usdc("100"));
    const opened = await m.call("/v1/mandates", { cap_decimal: "25", period: "month", customer: "cus_x" });
    const id = opened.json.id as string;
    const token = String(opened.json.authorization_url).split("/authorize/")[1] ?? "";
    const session = async () => (await api(`/authorize/${token}/session`, { key: null })).json;

    // Nobody signed yet: the new cap (and reference) at once, no event, the page asks for it.
    const unsigned = await m.call(`/v1/mandates/${id}`, { cap_decimal: "35", reference: "plan-b" });
    expect(unsigned.status, unsigned.text).toBe(200);
    expect(unsigned.json).toMatchObject({ cap_decimal: "35", pending_update: null, reference: "plan-b" });
    expect(await session()).toMatchObject({ cap_decimal: "35", cap_change: null, needs_signature: true });
    const bad = await m.call(`/v1/mandates/${id}`, { cap_decimal: "-1" });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ param: "cap_decimal" });

    const requested = await api(`/authorize/${token}/terms`, {
      key: null,
      idempotencyKey: null,
      body: { customer_address: customer.address },
    });
    expect(requested.status, requested.text).toBe(200);
    const { terms, permit } = requested.json as { terms: PageTypedData; permit: PageTypedData | null };
    expect(terms.message.cap).toBe("35000000");
    const submitted = await api(`/authorize/${token}/signatures`, {
      key: null,
      idempotencyKey: null,
      body: await signPageTerms(customer, terms, permit),
    });
    expect(submitted.status, submitted.text).toBe(200);
    await m.waitForEvents("mandate.authorized", 1, (o) => o.id === id);

    // A raise asked twice is one request; the cap in force again cancels it.
    for (const _ of [1, 2]) {
      const raised = await m.call(`/v1/mandates/${id}`, { cap_decimal: "50" });
      expect(raised.json, raised.text).toMatchObject({
        cap_decimal: "35",
        pending_update: { cap_decimal: "50" },
      });
    }
    expect(await session()).toMatchObject({
      cap_decimal: "50",
      cap_change: { from_decimal: "35", to_decimal: "50" },
      needs_signature: true,
    });
    const cancelled = await m.call(`/v1/mandates/${id}`, { cap_decimal: "35" });
    expect(cancelled.json).toMatchObject({ cap_decimal: "35", pending_update: null });
    expect(await session()).toMatchObject({ cap_decimal: "35", cap_change: null, needs_signature: false });
    const again = await m.call(`/v1/mandates/${id}`, { cap_decimal: "45" });
    expect(again.json).toMatchObject({ pending_update: { cap_decimal: "45" } });
    const requests = await m.waitForEvents("mandate.cap_change_requested", 2, (o) => o.id === id);
    expect(
      requests.map((e) => (e.data.object.pending_update as { cap_decimal: string }).cap_decimal).sort(),
    ).toEqual(["45", "50"]);
  });
});
