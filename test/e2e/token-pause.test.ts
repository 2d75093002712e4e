/**
 * Circle's pause on the real USDC (FiatToken v2.2 on anvil; the stack's `LOCAL_USDC_ADMIN_KEY` is its
 * pauser): while the token is paused the service sends nothing for it on that chain (charges, billing,
 * releases, sweeps, gasless payments, permits, test funds) and records nothing as anyone's failure; the
 * API answers 503 `token_paused` naming the token; `/ready` shows it without failing and `/metrics` has
 * a gauge for it; another chain carries on; and after `unpause` everything due meanwhile happens once.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import {
  createWalletClient,
  encodeFunctionData,
  erc20Abi,
  type Hex,
  http,
  type PrivateKeyAccount,
  parseGwei,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { usdcAbi } from "../../scripts/stack/circle-usdc.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver, circle, usd } from "./chain-driver.ts";
import {
  api,
  type EventOf,
  expectErrorShape,
  merchantOnTestChain,
  newAddress,
  newMerchantWithKey,
  query,
  stack,
} from "./helpers.ts";

const CHAIN = 31337;
const OTHER_CHAIN = 31339;
// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON bodies
type Json = any;
type Merchant = Awaited<ReturnType<typeof merchantOnTestChain>>;

const ready = async () => {
  const response = await fetch(`${stack().apiUrl}/ready`);
  return { status: response.status, json: (await response.json()) as Json };
};

const pausedGauge = async (chainId: number) => {
  const token = readFileSync(join(stack().dataDir, "metrics.token"), "utf8").trim();
  const text = await (
    await fetch(`${stack().apiUrl}/metrics`, { headers: { authorization: `Bearer ${token}` } })
  ).text();
  const line = text
    .split("\n")
    .find(
      (l) =>
        l.startsWith("billing_token_paused{") &&
        l.includes(`chain_id="${chainId}"`) &&
        l.includes('token="USDC"'),
    );
  return { value: line === undefined ? undefined : Number(line.split(" ").at(-1)), text };
};

/** Waits for the gauge's value (a scrape reads the token watch's last read); says what it saw. */
const gaugeIs = async (chainId: number, value: number) => {
  let last = "";
  await waitFor(
    async () => {
      const scraped = await pausedGauge(chainId);
      last = scraped.text;
      return scraped.value === value;
    },
    { timeoutMs: 10_000, what: `billing_token_paused of chain ${chainId} to be ${value}` },
  ).catch((error: unknown) => {
    throw new Error(`${String(error)}; last scrape:\n${last.slice(0, 4000)}`);
  });
};

const signedMandate = async (m: Merchant) => {
  const created = await m.call("/v1/mandates", { cap_decimal: "25", period: "month", customer: "cus_pause" });
  expect(created.status, created.text).toBe(200);
  const id = created.json.id as string;
  expect((await m.call(`/v1/test/mandates/${id}/fund`, { amount_decimal: "100" })).status).toBe(200);
  expect((await m.call(`/v1/test/mandates/${id}/authorize`, {})).status).toBe(200);
  return (await m.call(`/v1/mandates/${id}`)).json as { id: string; onchain_id: Hex };
};

const waitUntil = async (m: Merchant, path: string, what: string, ok: (object: Json) => boolean) => {
  let object: Json;
  await waitFor(
    async () => {
      object = (await m.call(path)).json;
      return ok(object);
    },
    { timeoutMs: 30_000, intervalMs: 100, what },
  );
  return object;
};

/** A 503 `token_paused` naming the token, in the one error shape. */
const expectPaused = (response: { status: number; json: Json; text?: string }) => {
  expect(response.status, JSON.stringify(response.json)).toBe(503);
  const error = expectErrorShape(response.json);
  expect(error).toMatchObject({ type: "api_error", code: "token_paused" });
  expect(error.message).toMatch(/^USDC \(0x[0-9a-f]{40}\) on chain 31337 is paused/);
};

const relayerTransactionsSince = async (chainId: number, since: string) =>
  (
    await query<{ n: number }>(
      "SELECT count(*)::int AS n FROM billing.relayer_transactions WHERE chain_id = $1 AND created_at > $2",
      [chainId, since],
    )
  )[0]?.n;

const invoicesOf = (subscription: string, period: number) =>
  query<{ status: string; attempt_count: number }>(
    "SELECT status, attempt_count FROM billing.invoices WHERE subscription_id = $1 AND period = $2",
    [subscription, period],
  );

describe("a paused token", () => {
  it("sends nothing for it, answers 503 token_paused, shows it, and resumes by itself once unpaused", async () => {
    const chain = chainDriver(CHAIN);
    const m = await merchantOnTestChain();

    // Due during the pause: a held charge's release, a subscription's next period, a deposit's sweep.
    const heldMandate = await signedMandate(m);
    const sent = (await m.call(`/v1/mandates/${heldMandate.id}/charges`, { amount_decimal: "4" })).json;
    const held = await waitUntil(
      m,
      `/v1/charges/${sent.id}`,
      "the held charge",
      (c) => c.status === "succeeded",
    );
    expect(held.held).toBe(true);
    const price = await m.call("/v1/prices", { product_name: "Seat", amount_decimal: "3" });
    const sub = (await m.call("/v1/subscriptions", { customer: "cus_sub", price: price.json.id })).json;
    await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "50" });
    expect((await m.call(`/v1/test/mandates/${sub.mandate}/authorize`, {})).status).toBe(200);
    await waitFor(async () => (await invoicesOf(sub.id, 0))[0]?.status === "paid", {
      timeoutMs: 30_000,
      what: "the first invoice paid",
    });
    const other = await signedMandate(m);
    const unsigned = (
      await m.call("/v1/mandates", { cap_decimal: "5", period: "month", customer: "cus_late" })
    ).json;
    const deposit = (await m.call("/v1/payments", { amount_decimal: "2", expires_in: 86_400 })).json;

    // The deposit's transfer and the pause in one block, the transfer first (its higher tip).
    const payer = privateKeyToAccount(generatePrivateKey());
    await chain.rpc("anvil_setBalance", [payer.address, "0xde0b6b3a7640000"]);
    await chain.mint(payer.address, usd("2"));
    const walletOf = (account: PrivateKeyAccount) =>
      createWalletClient({ chain: chain.client.chain, transport: http(chain.resolved.rpc.http[0]), account });
    await chain.rpc("evm_setAutomine", [false]);
    try {
      await walletOf(payer).sendTransaction({
        to: chain.usdc,
        data: encodeFunctionData({
          abi: erc20Abi,
          functionName: "transfer",
          args: [deposit.address, usd("2")],
        }),
        gas: 100_000n,
        maxPriorityFeePerGas: parseGwei("5"),
        maxFeePerGas: parseGwei("50"),
      });
      await walletOf(circle).sendTransaction({
        to: chain.usdc,
        data: encodeFunctionData({ abi: usdcAbi, functionName: "pause", args: [] }),
        gas: 100_000n,
        maxPriorityFeePerGas: 1n,
        maxFeePerGas: parseGwei("50"),
      });
      await chain.rpc("evm_mine", []);
    } finally {
      await chain.rpc("evm_setAutomine", [true]);
    }
    let unpaused = false;
    try {
      expect(
        await chain.client.readContract({ address: chain.usdc, abi: usdcAbi, functionName: "paused" }),
      ).toBe(true);
      expect(await chain.balanceOf(deposit.address)).toBe(usd("2"));
      const [{ at: pausedAt } = { at: "" }] = await query<{ at: string }>("SELECT now()::text AS at");

      // Seen: /ready names it and stays 200 (other chains and tokens keep working); the gauge is 1.
      await waitFor(async () => (await ready()).json.checks.tokens === "paused: USDC on chain 31337", {
        timeoutMs: 10_000,
        what: "/ready to show the pause",
      });
      expect((await ready()).status).toBe(200);
      // The deposit watcher saw the transfer: the payment waits for its sweep.
      await waitUntil(m, `/v1/payments/${deposit.id}`, "the transfer seen", (p) => p.status === "processing");
      await gaugeIs(CHAIN, 1);
      await gaugeIs(OTHER_CHAIN, 0);

      // The API refuses whatever would send a transaction for the token, and records nothing.
      expectPaused(await m.call(`/v1/mandates/${other.id}/charges`, { amount_decimal: "1" }));
      expect((await m.call(`/v1/mandates/${other.id}/charges`)).json.data).toEqual([]);
      expectPaused(await m.call(`/v1/charges/${held.id}/return`, {}));
      expectPaused(await m.call(`/v1/test/mandates/${other.id}/fund`, { amount_decimal: "1" }));
      expectPaused(await m.call(`/v1/test/mandates/${unsigned.id}/authorize`, {}));
      const gasless = await fetch(`${deposit.payment_url}/authorizations`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          from: payer.address,
          to: deposit.address,
          value: "2000000",
          valid_after: "0",
          valid_before: "99999999999",
          nonce: generatePrivateKey(),
          signature: `0x${"11".repeat(65)}`,
        }),
      });
      expectPaused({ status: gasless.status, json: await gasless.json() });

      // The hold ends and the next period starts while paused.
      const nextAt = (await m.call(`/v1/subscriptions/${sub.id}`)).json.next_billing_at as number;
      const now = (await m.advance(1)).json.now as number;
      await m.advance(Math.max(held.release_at, nextAt) - now + 60);
      // Another chain carries on meanwhile: a payment there is swept and paid.
      const elsewhere = await newMerchantWithKey("test");
      await api("/v1/merchant/chains", {
        key: elsewhere.key,
        body: { chain: OTHER_CHAIN, payout_address: newAddress() },
      });
      const otherPayment = (await api("/v1/payments", { key: elsewhere.key, body: { amount_decimal: "1" } }))
        .json;
      expect(otherPayment.chain).toBe(OTHER_CHAIN);
      expect(
        (
          await api(`/v1/test/payments/${otherPayment.id}/pay`, {
            key: elsewhere.key,
            body: { amount_decimal: "1" },
          })
        ).status,
      ).toBe(200);
      await waitFor(
        async () => {
          await chainDriver(OTHER_CHAIN).mine(1);
          return (
            (await api(`/v1/payments/${otherPayment.id}`, { key: elsewhere.key })).json.status === "paid"
          );
        },
        { timeoutMs: 30_000, intervalMs: 300, what: "the payment on the other chain to be paid" },
      );
      // The subscription is due (the gauge counts it) and billing has not touched it.
      expect((await m.call(`/v1/subscriptions/${sub.id}`)).json.status).toBe("active");

      // Nothing was sent on the paused token's chain, and nothing was recorded as a failure.
      expect(await relayerTransactionsSince(CHAIN, pausedAt)).toBe(0);
      expect(await invoicesOf(sub.id, 1)).toEqual([]);
      const heldNow = (await m.call(`/v1/charges/${held.id}`)).json;
      expect(heldNow).toMatchObject({ status: "succeeded", pending_action: null, release_failure: null });
      expect((await m.call(`/v1/payments/${deposit.id}`)).json).toMatchObject({
        status: "processing",
        sweep_failure: null,
      });
      expect(await m.events("charge.failed")).toEqual([]);
      expect(await m.events("invoice.payment_failed")).toEqual([]);

      // Unpaused: everything due meanwhile happens, once.
      await chain.issuer.unpause();
      unpaused = true;
      await waitFor(async () => (await ready()).json.checks.tokens === "ready", {
        timeoutMs: 10_000,
        what: "/ready to show the token resumed",
      });
      await m.waitForEvents("charge.released", 1, (o) => o.id === held.id);
      await m.waitForEvents("invoice.paid", 1, (o) => o.subscription === sub.id && o.period === 1);
      await m.waitForEvents("payment.paid", 1, (o) => o.id === deposit.id);
      expect(await invoicesOf(sub.id, 1)).toEqual([{ status: "paid", attempt_count: 1 }]);
      await gaugeIs(CHAIN, 0);
      const charged = (await m.call(`/v1/mandates/${other.id}/charges`, { amount_decimal: "1" })).json;
      await m.waitForEvents("charge.succeeded", 1, (o) => o.id === charged.id);
      expect(
        (await m.events("charge.released")).filter((e: EventOf) => e.data.object.id === held.id),
      ).toHaveLength(1);
      expect(await m.events("charge.failed")).toEqual([]);
    } finally {
      if (!unpaused) await chain.issuer.unpause().catch(() => undefined);
    }
  });
});
