/**
 * Circle's blacklist on the real USDC (FiatToken v2.2 on anvil; the stack's `LOCAL_USDC_ADMIN_KEY` is
 * its blacklister). A blacklisted customer: the charge fails with `customer_blocked` and `charge.failed`,
 * no transaction is sent, and a subscription is billed again the next period instead of being canceled.
 * A blacklisted payout address: that merchant's charges (without hold), releases and sweeps fail alone
 * while another merchant's go through in the same pass; the merchant learns it from the objects and one
 * event per episode; nothing is lost or retried in a loop, and everything moves by itself once the
 * address is cleared.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createWalletClient, encodeFunctionData, erc20Abi, type Hex, http } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import { api, type EventOf, merchantOnTestChain, query, stack } from "./helpers.ts";
import { startSecondService } from "./second-service.ts";

const CHAIN = 31337;
const DAY = 86_400;
const HOLD = 3600;
// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON bodies
type Json = any;
type Merchant = Awaited<ReturnType<typeof merchantOnTestChain>>;

const cleanups: Array<() => void> = [];
afterAll(() => {
  for (const cleanup of cleanups.reverse()) cleanup();
});

/**
 * A second service process on the stack's database whose config runs 31337 without escrow: mandates and
 * payments opened through it pay the payee directly (hold 0), as on a chain without escrow.
 */
const startDirectService = async () => {
  const dir = mkdtempSync(join(tmpdir(), "no-hold-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const config = JSON.parse(readFileSync(stack().chainsFile, "utf8")) as {
    chains: Array<{ id: number; escrow_available: boolean; hold_seconds: number }>;
  };
  const chain = config.chains.find((c) => c.id === CHAIN);
  if (!chain) throw new Error(`no chain ${CHAIN}`);
  chain.escrow_available = false;
  chain.hold_seconds = 0;
  const file = join(dir, "chains.json");
  writeFileSync(file, JSON.stringify(config, null, 2));
  return startSecondService({ CHAINS_CONFIG: file, RELAYER_PRIVATE_KEY: stack().relayerKey });
};

const callAt = (m: Merchant, baseUrl: string | undefined, path: string, body?: unknown) =>
  api(path, { key: m.key, ...(baseUrl ? { baseUrl } : {}), ...(body === undefined ? {} : { body }) });

/** A mandate signed by its test wallet and funded, opened through `baseUrl` (default: the stack's service). */
const signedMandate = async (m: Merchant, baseUrl?: string) => {
  const created = await callAt(m, baseUrl, "/v1/mandates", {
    cap_decimal: "25",
    period: "month",
    customer: "cus_blacklist",
  });
  expect(created.status, created.text).toBe(200);
  const id = created.json.id as string;
  expect((await m.call(`/v1/test/mandates/${id}/fund`, { amount_decimal: "100" })).status).toBe(200);
  const authorized = await m.call(`/v1/test/mandates/${id}/authorize`, {});
  expect(authorized.status, authorized.text).toBe(200);
  return authorized.json as { id: string; customer_address: Hex; onchain_id: Hex; hold_seconds: number };
};

const charge = async (m: Merchant, mandate: string, amount: string) => {
  const charged = await m.call(`/v1/mandates/${mandate}/charges`, { amount_decimal: amount });
  expect(charged.status, charged.text).toBe(200);
  return charged.json as Json;
};

const retrieve = async (m: Merchant, path: string) => (await m.call(path)).json as Json;

const waitUntil = async (m: Merchant, path: string, what: string, ok: (object: Json) => boolean) => {
  let object: Json;
  await waitFor(
    async () => {
      object = await retrieve(m, path);
      return ok(object);
    },
    { timeoutMs: 30_000, intervalMs: 100, what },
  );
  return object;
};

/** Events of `type` about the object `id`. */
const eventsOf = async (m: Merchant, type: string, id: string) =>
  (await m.events(type)).filter((e: EventOf) => e.data.object.id === id);

/** The relayer transactions whose purpose starts with `prefix` and whose calldata names `hexId`. */
const relayerTransactions = async (prefix: string, hexId: string) =>
  (
    await query<{ n: number }>(
      `SELECT count(*)::int AS n FROM billing.relayer_transactions
       WHERE chain_id = $1 AND purpose LIKE $2 AND position($3 in lower(data)) > 0`,
      [CHAIN, `${prefix}%`, hexId.slice(2).toLowerCase()],
    )
  )[0]?.n;

const payFromTestWallet = async (m: Merchant, payment: string, amount: string) => {
  const paid = await m.call(`/v1/test/payments/${payment}/pay`, { amount_decimal: amount });
  expect(paid.status, paid.text).toBe(200);
};

const invoiceOf = async (subscription: string, period: number) =>
  (
    await query<{ id: string; status: string; attempt_count: number; first_failed_at: string | null }>(
      `SELECT id, status, attempt_count, first_failed_at::text AS first_failed_at FROM billing.invoices
       WHERE subscription_id = $1 AND period = $2`,
      [subscription, period],
    )
  )[0];

const waitInvoice = (subscription: string, period: number, what: string, ok: (i: Json) => boolean) =>
  waitFor(async () => ok(await invoiceOf(subscription, period)), {
    timeoutMs: 30_000,
    intervalMs: 100,
    what: `invoice ${period} of ${subscription}: ${what}`,
  });

describe("a blacklisted customer", () => {
  it("fails the charge with customer_blocked and charge.failed, sends nothing, and keeps the subscription", async () => {
    const chain = chainDriver(CHAIN);
    const m = await merchantOnTestChain();
    const mandate = await signedMandate(m);
    await chain.issuer.blacklist(mandate.customer_address);
    cleanups.push(() => void chain.issuer.unBlacklist(mandate.customer_address).catch(() => undefined));

    const failed = await charge(m, mandate.id, "5");
    expect(failed).toMatchObject({ status: "failed", failure_code: "customer_blocked" });
    expect(failed.failure_message).toMatch(/blacklisted the customer's wallet/);
    const [event] = await m.waitForEvents("charge.failed", 1, (o) => o.id === failed.id);
    expect(event?.data.object).toMatchObject({ id: failed.id, failure_code: "customer_blocked" });
    // Not the customer's funds: no mandate.insufficient, and the mandate stays chargeable.
    expect(await eventsOf(m, "mandate.insufficient", mandate.id)).toEqual([]);
    expect((await retrieve(m, `/v1/mandates/${mandate.id}`)).status).toBe("active");
    // No gas beyond the simulation: the relayer sent no charge of this mandate.
    expect(await relayerTransactions("charge", mandate.onchain_id)).toBe(0);

    // A subscription whose customer is blacklisted after the first period.
    const price = await m.call("/v1/prices", { product_name: "Seat", amount_decimal: "3" });
    const opened = await m.call("/v1/subscriptions", { customer: "cus_sub", price: price.json.id });
    expect(opened.status, opened.text).toBe(200);
    const sub = opened.json as { id: string; mandate: string };
    await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "50" });
    const signed = (await m.call(`/v1/test/mandates/${sub.mandate}/authorize`, {})).json as {
      customer_address: Hex;
      onchain_id: Hex;
    };
    await waitInvoice(sub.id, 0, "paid", (i) => i?.status === "paid");
    await chain.issuer.blacklist(signed.customer_address);
    cleanups.push(() => void chain.issuer.unBlacklist(signed.customer_address).catch(() => undefined));

    let now = (await m.advance(1)).json.now as number;
    const to = async (at: number) => {
      if (at > now) now = (await m.advance(at - now)).json.now as number;
    };
    const periodOneAt = (await retrieve(m, `/v1/subscriptions/${sub.id}`)).next_billing_at as number;
    await to(periodOneAt + 60);
    await waitInvoice(sub.id, 1, "first attempt failed", (i) => i?.attempt_count === 1);
    const first = await invoiceOf(sub.id, 1);
    expect(first?.status).toBe("open");
    expect((await retrieve(m, `/v1/subscriptions/${sub.id}`)).status).toBe("past_due");
    const firstFailedAt = Number(first?.first_failed_at);
    // Every dunning retry fails the same way, each costing a simulation and no transaction.
    for (const [n, days] of [1, 3, 5, 7].entries()) {
      await to(firstFailedAt + days * DAY + 60);
      await waitInvoice(sub.id, 1, `retry ${n + 1}`, (i) => i?.attempt_count === n + 2);
    }
    await waitInvoice(sub.id, 1, "given up", (i) => i?.status === "uncollectible");
    const kept = await retrieve(m, `/v1/subscriptions/${sub.id}`);
    expect(kept.status).toBe("past_due");
    expect(kept.canceled_at).toBeNull();
    const failures = (await m.events("charge.failed")).filter(
      (e: EventOf) => e.data.object.mandate === sub.mandate,
    );
    expect(failures.map((e: EventOf) => e.data.object.failure_code)).toEqual(
      Array(5).fill("customer_blocked"),
    );
    expect(await relayerTransactions("charge", signed.onchain_id)).toBe(1);

    // Cleared before the next period: it is billed and paid as usual; the subscription never ended.
    await chain.issuer.unBlacklist(signed.customer_address);
    const periodTwoAt = (await retrieve(m, `/v1/subscriptions/${sub.id}`)).next_billing_at as number;
    await to(periodTwoAt + 60);
    await waitInvoice(sub.id, 2, "paid", (i) => i?.status === "paid");
    expect((await retrieve(m, `/v1/subscriptions/${sub.id}`)).status).toBe("active");
    expect(
      (await m.events("subscription.canceled")).filter((e: EventOf) => e.data.object.id === sub.id),
    ).toEqual([]);
    expect((await invoiceOf(sub.id, 1))?.status).toBe("uncollectible");
  });
});

describe("a blacklisted payout address", () => {
  it("holds back that merchant's charges, releases and sweeps alone, and moves them once cleared", async () => {
    const chain = chainDriver(CHAIN);
    const direct = await startDirectService();
    const a = await merchantOnTestChain(); // its payout address gets blacklisted
    const b = await merchantOnTestChain();
    const payoutA = a.payoutAddress as Hex;

    // Mandates with the chain's hold (the stack's service) and without (the direct service); payments
    // without hold from the direct service.
    const [heldA, heldB, directA, directB] = await Promise.all([
      signedMandate(a),
      signedMandate(b),
      signedMandate(a, direct),
      signedMandate(b, direct),
    ]);
    expect([heldA.hold_seconds, directA.hold_seconds]).toEqual([HOLD, 0]);
    const depositOf = async (m: Merchant) => {
      const created = await callAt(m, direct, "/v1/payments", { amount_decimal: "2", expires_in: DAY });
      expect(created.status, created.text).toBe(200);
      return created.json as { id: string; address: Hex };
    };
    const [depositA, depositB] = [await depositOf(a), await depositOf(b)];

    await chain.issuer.blacklist(payoutA);
    cleanups.push(() => void chain.issuer.unBlacklist(payoutA).catch(() => undefined));

    // 1. Without a hold the charge itself pays the payout address: it fails, the merchant's problem.
    const refused = await charge(a, directA.id, "4");
    expect(refused).toMatchObject({ status: "failed", failure_code: "payout_address_blocked" });
    expect(await eventsOf(a, "mandate.insufficient", directA.id)).toEqual([]);
    await a.waitForEvents("charge.failed", 1, (o) => o.id === refused.id);
    expect(await relayerTransactions("charge", directA.onchain_id)).toBe(0);
    const paidB = await charge(b, directB.id, "4");
    expect(paidB.status).toBe("pending");
    await b.waitForEvents("charge.succeeded", 1, (o) => o.id === paidB.id);

    // With a hold the charge goes into escrow and succeeds; so does a payment swept into its hold.
    const [heldChargeA, heldChargeB] = [await charge(a, heldA.id, "4"), await charge(b, heldB.id, "4")];
    for (const [m, id] of [
      [a, heldChargeA.id],
      [b, heldChargeB.id],
    ] as const)
      await waitUntil(m, `/v1/charges/${id}`, `${id} succeeded`, (c) => c.status === "succeeded");
    const heldPayment = async (m: Merchant) => {
      const created = await m.call("/v1/payments", { amount_decimal: "3" });
      await payFromTestWallet(m, created.json.id, "3");
      return waitUntil(m, `/v1/payments/${created.json.id}`, "held payment paid", (p) => p.status === "paid");
    };
    const [heldPaymentA, heldPaymentB] = [await heldPayment(a), await heldPayment(b)];
    expect([heldPaymentA.held, heldPaymentB.held]).toEqual([true, true]);

    // 2. Both merchants' holds end at once: one releaseMany and one releasePayments batch each, from
    // which A's items are split off alone and B's go through.
    const before = await chain.client.getBlockNumber();
    await a.advance(HOLD + 60);
    const releasedB = await waitUntil(
      b,
      `/v1/charges/${heldChargeB.id}`,
      "B's release",
      (c) => c.status === "released",
    );
    await waitUntil(b, `/v1/payments/${heldPaymentB.id}`, "B's payment release", (p) => !p.held);
    const blockedCharge = await waitUntil(
      a,
      `/v1/charges/${heldChargeA.id}`,
      "A's release held back",
      (c) => c.release_failure !== null,
    );
    expect(blockedCharge).toMatchObject({
      status: "succeeded",
      held: true,
      release_failure: { code: "payout_address_blocked" },
    });
    expect(
      blockedCharge.release_failure.next_attempt - blockedCharge.release_failure.since,
    ).toBeGreaterThanOrEqual(60);
    const blockedPayment = await waitUntil(
      a,
      `/v1/payments/${heldPaymentA.id}`,
      "A's payment release held back",
      (p) => p.release_failure !== null,
    );
    expect(blockedPayment).toMatchObject({ held: true, release_failure: { code: "payout_address_blocked" } });
    // B's release was mined within a few blocks of the holds ending (the clock's block, a release each).
    expect(releasedB.ended_onchain.block_number - Number(before)).toBeLessThanOrEqual(6);

    // 3. Both deposits paid in one block: one sweep batch, A's deposit split off, B's swept.
    const payer = privateKeyToAccount(generatePrivateKey());
    await chain.rpc("anvil_setBalance", [payer.address, "0xde0b6b3a7640000"]);
    await chain.mint(payer.address, usd("4"));
    const wallet = createWalletClient({
      chain: chain.client.chain,
      transport: http(chain.resolved.rpc.http[0]),
      account: payer,
    });
    const transfer = async (to: Hex, nonce: number) =>
      wallet.sendTransaction({
        to: chain.usdc,
        data: encodeFunctionData({ abi: erc20Abi, functionName: "transfer", args: [to, usd("2")] }),
        nonce,
        gas: 100_000n,
      });
    const nonce = await chain.client.getTransactionCount({ address: payer.address });
    await chain.rpc("evm_setAutomine", [false]);
    try {
      await transfer(depositA.address, nonce);
      await transfer(depositB.address, nonce + 1);
      await chain.rpc("evm_mine", []);
    } finally {
      await chain.rpc("evm_setAutomine", [true]);
    }
    const sweptAt = await chain.client.getBlockNumber();
    const sweptB = await waitUntil(
      b,
      `/v1/payments/${depositB.id}`,
      "B's deposit paid",
      (p) => p.status === "paid",
    );
    expect(sweptB.held).toBe(false);
    const blockedSweep = await waitUntil(
      a,
      `/v1/payments/${depositA.id}`,
      "A's sweep held back",
      (p) => p.sweep_failure !== null,
    );
    expect(blockedSweep).toMatchObject({
      status: "processing",
      amount_pending_decimal: "2",
      sweep_failure: { code: "payout_address_blocked" },
    });
    const [sweepFact] = await query<{ block_number: string }>(
      "SELECT block_number::text FROM billing.payment_facts WHERE payment_id = $1",
      [depositB.id],
    );
    expect(Number(sweepFact?.block_number) - Number(sweptAt)).toBeLessThanOrEqual(3);
    // Nothing lost: A's funds are still at the deposit address and in escrow.
    expect(await chain.balanceOf(depositA.address)).toBe(usd("2"));

    // One event per episode, whatever the retries: a retry brought forward (as if its minutes had
    // passed) is refused again, pushed back again, and raises nothing new.
    const [forward] = await query<{ at: string }>(
      "UPDATE billing.charges SET release_retry_at = now() WHERE id = $1 RETURNING release_retry_at::text AS at",
      [heldChargeA.id],
    );
    await waitFor(
      async () =>
        (
          await query<{ later: boolean }>(
            `SELECT release_retry_at > $2::timestamptz + interval '50 seconds' AS later
             FROM billing.charges WHERE id = $1`,
            [heldChargeA.id, forward?.at],
          )
        )[0]?.later === true,
      { timeoutMs: 30_000, what: "the brought-forward retry to be refused and held back again" },
    );
    expect(await eventsOf(a, "charge.release_failed", heldChargeA.id)).toHaveLength(1);
    expect(await eventsOf(a, "payment.release_failed", heldPaymentA.id)).toHaveLength(1);
    expect(await eventsOf(a, "payment.sweep_failed", depositA.id)).toHaveLength(1);
    expect(await relayerTransactions("release", heldA.onchain_id)).toBe(0);
    const [paymentIds] = await query<{ held: string; deposit: string }>(
      `SELECT (SELECT onchain_id FROM billing.payments WHERE id = $1) AS held,
         (SELECT onchain_id FROM billing.payments WHERE id = $2) AS deposit`,
      [heldPaymentA.id, depositA.id],
    );
    expect(await relayerTransactions("payment-release", paymentIds?.held as Hex)).toBe(0);
    expect(await relayerTransactions("sweep", paymentIds?.deposit as Hex)).toBe(0);
    expect(await eventsOf(b, "charge.release_failed", heldChargeB.id)).toEqual([]);

    // 4. Cleared: everything moves by itself, long before the held-back items' own retry time.
    await chain.issuer.unBlacklist(payoutA);
    await a.waitForEvents("charge.released", 1, (o) => o.id === heldChargeA.id);
    await a.waitForEvents("payment.paid", 1, (o) => o.id === depositA.id);
    const releasedPayment = await waitUntil(
      a,
      `/v1/payments/${heldPaymentA.id}`,
      "A's payment released",
      (p) => !p.held,
    );
    expect(releasedPayment.release_failure).toBeNull();
    expect((await retrieve(a, `/v1/charges/${heldChargeA.id}`)).release_failure).toBeNull();
    expect((await retrieve(a, `/v1/payments/${depositA.id}`)).sweep_failure).toBeNull();
    const again = await charge(a, directA.id, "4");
    await a.waitForEvents("charge.succeeded", 1, (o) => o.id === again.id);
    // 4 (held charge) + 3 (held payment) + 2 (deposit) + 4 (charged again, no hold).
    await waitFor(async () => (await chain.balanceOf(payoutA)) === usd("13"), {
      timeoutMs: 30_000,
      what: "A's payout address to hold everything",
    });
  });
});
