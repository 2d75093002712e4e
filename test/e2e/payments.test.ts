/**
 * One-time payments on the real stack: a deposit address per payment, paid by plain ERC-20 transfers
 * (the test helper's, or a test's own), swept through the escrow by the relayer, indexed, confirmed and
 * reported once each as `payment.paid`, `payment.underpaid` or `payment.reversed`.
 */
import { createHmac } from "node:crypto";
import {
  createWalletClient,
  decodeFunctionData,
  encodeFunctionData,
  erc20Abi,
  type Hex,
  http,
  parseUnits,
} from "viem";
import { afterAll, describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import { verifySignature } from "../../service/webhooks/signature.ts";
import { chainDriver } from "./chain-driver.ts";
import { api, type EventOf, merchantOnTestChain, newAddress, newMerchantWithKey, query } from "./helpers.ts";
import { startReceiver } from "./receiver.ts";
import { relaySettled, workerPassed } from "./settle.ts";

type Merchant = Awaited<ReturnType<typeof merchantOnTestChain>>;
// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON bodies
type Json = any;

const receivers: Array<{ close(): Promise<void> }> = [];
afterAll(async () => {
  for (const receiver of receivers) await receiver.close();
});

const create = async (m: Merchant, body: Record<string, unknown>) => {
  const created = await m.call("/v1/payments", body);
  expect(created.status, created.text).toBe(200);
  return created.json as Json;
};

const pay = async (m: Merchant, id: string, amount: string, from?: string) => {
  const paid = await m.call(`/v1/test/payments/${id}/pay`, {
    amount_decimal: amount,
    ...(from ? { from } : {}),
  });
  expect(paid.status, paid.text).toBe(200);
  return paid.json as Json;
};

const chainTime = async () => Number((await chainDriver(31337).client.getBlock()).timestamp);

const retrieve = async (m: Merchant, id: string) => (await m.call(`/v1/payments/${id}`)).json as Json;

const waitForStatus = async (m: Merchant, id: string, status: string, timeoutMs = 30_000) => {
  let payment: Json;
  await waitFor(
    async () => {
      payment = await retrieve(m, id);
      return payment.status === status;
    },
    { timeoutMs, intervalMs: 100, what: `payment ${id} to be ${status}` },
  );
  return payment;
};

/** The payment's events, oldest first. */
const eventsOf = async (m: Merchant, id: string) => {
  const all: EventOf[] = [];
  for (const type of ["payment.paid", "payment.underpaid", "payment.reversed"])
    all.push(...(await m.events(type)).filter((e) => e.data.object.id === id));
  return all.sort((a, b) => (a.id < b.id ? -1 : 1)).map((e) => e.type);
};

const sweepsOf = (depositAddress: string) =>
  query<{ tx_hash: string }>(
    "SELECT tx_hash FROM onchain.fact WHERE kind = 'payment.received' AND details->>'deposit_address' = $1",
    [depositAddress.toLowerCase()],
  );

const balanceOf = (address: Hex) => chainDriver(31337).balanceOf(address);

/**
 * The settle point for counting sweeps, releases and payment events: the sweeper and the releaser have
 * each made a whole pass since, and the relay has read past anything they sent.
 */
const paymentsSettled = async () => {
  await Promise.all([workerPassed("deposit-sweeper"), workerPassed("payment-releaser")]);
  await relaySettled(31337);
};

describe("payments API", () => {
  it("creates a payment with a deposit address, a pay page and the documented defaults", async () => {
    const m = await merchantOnTestChain();
    const chainBefore = await chainTime();
    const payment = await create(m, {
      amount_decimal: "12.34",
      reference: "order-1",
      description: "Two mugs",
    });
    const chainAfter = await chainTime();
    expect(payment).toMatchObject({
      object: "payment",
      livemode: false,
      status: "requires_payment",
      amount: "12340000",
      amount_decimal: "12.34",
      amount_received_decimal: "0",
      amount_remaining_decimal: "12.34",
      token: "USDC",
      chain: 31337,
      reference: "order-1",
      description: "Two mugs",
      transfers: [],
      held: false,
    });
    expect(payment.id).toMatch(/^pay_[0-9A-Z]{26}$/);
    expect(payment.address).toMatch(/^0x[0-9a-fA-F]{40}$/);
    expect(payment.payment_url).toMatch(/\/pay\/[A-Za-z0-9_-]{32}$/);
    // Expiry counts in chain time (other tests move this shared chain's clock ahead of the wall clock).
    expect(payment.expires_at).toBeGreaterThanOrEqual(chainBefore + 3600);
    expect(payment.expires_at).toBeLessThanOrEqual(chainAfter + 3600);
    const listed = await m.call("/v1/payments?reference=order-1");
    expect(listed.json.data.map((p: Json) => p.id)).toEqual([payment.id]);
    expect((await m.call("/v1/payments?status=paid")).json.data).toEqual([]);
  });

  it("is paid by one transfer: payment.paid once, with the transfer that paid it", async () => {
    const m = await merchantOnTestChain();
    const payment = await create(m, { amount_decimal: "10" });
    const sent = await pay(m, payment.id, "10");
    const paid = await waitForStatus(m, payment.id, "paid");
    expect(paid).toMatchObject({
      amount_received_decimal: "10",
      amount_remaining_decimal: "0",
      held: true,
      amount_held_decimal: "10",
      transfers: [
        {
          transaction_hash: sent.transaction_hash,
          block_number: sent.block_number,
          from: sent.from,
          amount_decimal: "10",
        },
      ],
    });
    expect(paid.paid_at).toBeGreaterThan(0);
    await m.waitForEvents("payment.paid", 1, (o) => o.id === payment.id);
    await paymentsSettled();
    expect(await eventsOf(m, payment.id)).toEqual(["payment.paid"]);
    expect(await sweepsOf(payment.address)).toHaveLength(1);
  });

  it("takes two transfers summing to the amount, swept once", async () => {
    const m = await merchantOnTestChain();
    const payment = await create(m, { amount_decimal: "10" });
    await pay(m, payment.id, "4");
    const partly = await waitForStatus(m, payment.id, "processing");
    expect(partly.amount_pending_decimal).toBe("4");
    expect(partly.amount_remaining_decimal).toBe("10");
    await pay(m, payment.id, "6");
    const paid = await waitForStatus(m, payment.id, "paid");
    expect(paid.transfers).toHaveLength(2);
    expect(paid.amount_received_decimal).toBe("10");
    await paymentsSettled();
    expect(await sweepsOf(payment.address)).toHaveLength(1);
    expect(await eventsOf(m, payment.id)).toEqual(["payment.paid"]);
  });

  it("shows an overpayment as paid with amount_received above the amount", async () => {
    const m = await merchantOnTestChain();
    const payment = await create(m, { amount_decimal: "10" });
    await pay(m, payment.id, "15.5");
    const paid = await waitForStatus(m, payment.id, "paid");
    expect(paid).toMatchObject({ amount_received_decimal: "15.5", amount_remaining_decimal: "0" });
  });

  it("expires with nothing received (no event), then a late payment is paid", async () => {
    const m = await merchantOnTestChain();
    const payment = await create(m, { amount_decimal: "5", expires_in: 60 });
    await m.advance(120);
    await waitForStatus(m, payment.id, "expired");
    expect(await eventsOf(m, payment.id)).toEqual([]);
    await pay(m, payment.id, "5");
    await waitForStatus(m, payment.id, "paid");
    expect(await eventsOf(m, payment.id)).toEqual(["payment.paid"]);
  });

  it("is underpaid at expiry, then a top-up completes it", async () => {
    const m = await merchantOnTestChain();
    const payment = await create(m, { amount_decimal: "10", expires_in: 60 });
    await pay(m, payment.id, "3");
    await waitForStatus(m, payment.id, "processing");
    await m.advance(120);
    const underpaid = await waitForStatus(m, payment.id, "underpaid");
    expect(underpaid).toMatchObject({ amount_received_decimal: "3", amount_remaining_decimal: "7" });
    const [event] = await m.waitForEvents("payment.underpaid", 1, (o) => o.id === payment.id);
    expect(event?.data.object).toMatchObject({ status: "underpaid", amount_received_decimal: "3" });
    await pay(m, payment.id, "7");
    await waitForStatus(m, payment.id, "paid");
    await m.waitForEvents("payment.paid", 1, (o) => o.id === payment.id);
    expect(await eventsOf(m, payment.id)).toEqual(["payment.underpaid", "payment.paid"]);
  });

  it("cancels only while nothing arrived; funds sent later still reach the merchant", async () => {
    const m = await merchantOnTestChain();
    const payment = await create(m, { amount_decimal: "2" });
    const canceled = await m.call(`/v1/payments/${payment.id}/cancel`, {});
    expect(canceled.status).toBe(200);
    expect(canceled.json).toMatchObject({ status: "canceled" });
    expect(canceled.json.canceled_at).toBeGreaterThan(0);
    const again = await m.call(`/v1/payments/${payment.id}/cancel`, {});
    expect(again.status).toBe(400);
    expect(again.json.error.code).toBe("payment_not_cancelable");
    await pay(m, payment.id, "2");
    await waitForStatus(m, payment.id, "paid");

    const busy = await create(m, { amount_decimal: "2" });
    await pay(m, busy.id, "1");
    await waitForStatus(m, busy.id, "processing");
    const refused = await m.call(`/v1/payments/${busy.id}/cancel`, {});
    expect(refused.status).toBe(400);
    expect(refused.json.error.code).toBe("payment_not_cancelable");
  });

  it("returns held funds to the payer during the hold (payment.reversed), releases them after it", async () => {
    const m = await merchantOnTestChain();
    const returned = await create(m, { amount_decimal: "8" });
    const payer = newAddress();
    await pay(m, returned.id, "8", payer);
    await waitForStatus(m, returned.id, "paid");
    const before = await balanceOf(payer);
    const answer = await m.call(`/v1/payments/${returned.id}/return`, {});
    expect(answer.status, answer.text).toBe(200);
    expect(answer.json).toMatchObject({ pending_action: "return", return_to: payer });
    const reversed = await waitForStatus(m, returned.id, "reversed");
    expect(reversed).toMatchObject({ amount_received_decimal: "0", held: false, pending_action: null });
    expect((await balanceOf(payer)) - before).toBe(parseUnits("8", 6));
    await m.waitForEvents("payment.reversed", 1, (o) => o.id === returned.id);
    expect(await eventsOf(m, returned.id)).toEqual(["payment.paid", "payment.reversed"]);
    const twice = await m.call(`/v1/payments/${returned.id}/return`, {});
    expect(twice.json.error.code).toBe("payment_not_returnable");

    // Another payment, to an address the merchant names, then one released after its hold.
    const elsewhere = await create(m, { amount_decimal: "1" });
    await pay(m, elsewhere.id, "1");
    await waitForStatus(m, elsewhere.id, "paid");
    const target = newAddress();
    const named = await m.call(`/v1/payments/${elsewhere.id}/return`, { address: target });
    expect(named.status, named.text).toBe(200);
    await waitForStatus(m, elsewhere.id, "reversed");
    expect(await balanceOf(target)).toBe(parseUnits("1", 6));
    const bad = await m.call(`/v1/payments/${elsewhere.id}/return`, { address: "0x123" });
    expect(bad.json.error).toMatchObject({ code: "parameter_invalid", param: "address" });

    const kept = await create(m, { amount_decimal: "3" });
    await pay(m, kept.id, "3");
    const held = await waitForStatus(m, kept.id, "paid");
    const payout = (await m.call("/v1/merchant/chains")).json.data[0].payout_address as Hex;
    const payoutBefore = await balanceOf(payout);
    await m.advance(held.release_at - held.paid_at + 10);
    await waitFor(async () => (await retrieve(m, kept.id)).held === false, {
      timeoutMs: 30_000,
      what: "the hold to be released",
    });
    expect((await balanceOf(payout)) - payoutBefore).toBe(parseUnits("3", 6));
    const late = await m.call(`/v1/payments/${kept.id}/return`, {});
    expect(late.json.error.code).toBe("payment_not_returnable");
    expect((await retrieve(m, kept.id)).status).toBe("paid");
  });

  it("mines a release batch one of whose payments a stranger released first, and releases every payment once", async () => {
    const m = await merchantOnTestChain();
    const chain = chainDriver(31337);
    const payments: Json[] = [];
    for (const amount of ["1", "2", "3"]) {
      const payment = await create(m, { amount_decimal: amount });
      await pay(m, payment.id, amount);
      payments.push(payment);
    }
    const paid = [];
    for (const payment of payments) paid.push(await waitForStatus(m, payment.id, "paid"));
    const [terms] = await query<{
      onchain_id: Hex;
      payee_address: Hex;
      token_address: Hex;
      operator_address: Hex;
      hold_seconds: number;
    }>(
      "SELECT onchain_id, payee_address, token_address, operator_address, hold_seconds FROM billing.payments WHERE id = $1",
      [payments[1].id],
    );
    if (terms === undefined) throw new Error("no payment row");
    const stranger = await chain.newStranger();
    const payoutBefore = await balanceOf(m.payoutAddress as Hex);

    // Chain time passes every hold's end without a transaction; the stranger's release of the middle
    // payment waits in the mempool with a higher tip, and the service's batch (all three) joins it.
    await chain.rpc("evm_setAutomine", [false]);
    let frontRun: Hex;
    try {
      await chain.increaseTime(Math.max(...paid.map((p) => p.release_at)) - (await chainTime()) + 1);
      await chain.mine();
      frontRun = await chain.sendAhead(
        stranger,
        chain.escrow,
        encodeFunctionData({
          abi: MandateEscrowAbi,
          functionName: "releasePayments",
          args: [
            [
              {
                paymentId: terms.onchain_id,
                payee: terms.payee_address,
                token: terms.token_address,
                operator: terms.operator_address,
                holdSeconds: BigInt(terms.hold_seconds),
              },
            ],
          ],
        }),
      );
      await waitFor(
        async () =>
          (await Promise.all(payments.map((p) => retrieve(m, p.id)))).every(
            (p) => p.pending_action === "release",
          ),
        {
          timeoutMs: 20_000,
          intervalMs: 100,
          what: "the service's release of the three payments to be submitted",
        },
      );
      await chain.rpc("evm_mine", []);
    } finally {
      await chain.rpc("evm_setAutomine", [true]);
    }

    for (const payment of payments)
      await waitFor(async () => (await retrieve(m, payment.id)).held === false, {
        timeoutMs: 30_000,
        what: `payment ${payment.id}'s hold to be released`,
      });
    await paymentsSettled();
    const releases = [];
    for (const payment of payments) {
      expect(await retrieve(m, payment.id)).toMatchObject({ status: "paid", pending_action: null });
      const rows = await query<{ tx_hash: string }>(
        "SELECT tx_hash FROM onchain.fact WHERE kind = 'payment.released' AND details->>'deposit_address' = $1",
        [payment.address.toLowerCase()],
      );
      expect(rows).toHaveLength(1);
      releases.push(rows[0]?.tx_hash as Hex);
    }
    expect(releases[1]).toBe(frontRun);
    const batchHash = releases[0] as Hex;
    expect(batchHash).not.toBe(frontRun);
    expect(releases[2]).toBe(batchHash);
    // One block: the stranger's release, then the batch, which mined (no revert) and named all three.
    const first = await chain.client.getTransactionReceipt({ hash: frontRun });
    const batch = await chain.client.getTransactionReceipt({ hash: batchHash });
    expect(batch.status).toBe("success");
    expect(batch.blockNumber).toBe(first.blockNumber);
    expect(batch.transactionIndex).toBeGreaterThan(first.transactionIndex);
    const [sent] = await query<{ data: Hex; status: string }>(
      "SELECT data, status FROM billing.relayer_transactions WHERE $1 = ANY (hashes)",
      [batchHash],
    );
    expect(sent?.status).not.toBe("reverted");
    const call = decodeFunctionData({ abi: MandateEscrowAbi, data: sent?.data as Hex });
    expect(call.functionName).toBe("releasePayments");
    const named = ((call.args ?? [])[0] as readonly { paymentId: string }[]).map((d) =>
      d.paymentId.toLowerCase(),
    );
    expect(named).toContain(terms.onchain_id.toLowerCase());
    expect((await balanceOf(m.payoutAddress as Hex)) - payoutBefore).toBe(parseUnits("6", 6));
    for (const payment of payments) expect(await eventsOf(m, payment.id)).toEqual(["payment.paid"]);
  });

  it("sweeps several deposit addresses paid in one block with one transaction", async () => {
    const m = await merchantOnTestChain();
    const chain = chainDriver(31337);
    const payments = await Promise.all([1, 2, 3, 4, 5].map((n) => create(m, { amount_decimal: `${n}` })));
    const payers = await Promise.all(payments.map(() => chain.newCustomer(parseUnits("10", 6))));
    const transport = http(chain.resolved.rpc.http[0]);
    await chain.rpc("evm_setAutomine", [false]);
    try {
      for (const [i, payer] of payers.entries()) {
        const wallet = createWalletClient({ account: payer, chain: chain.client.chain, transport });
        const request = await wallet.prepareTransactionRequest({
          to: chain.usdc,
          data: encodeFunctionData({
            abi: erc20Abi,
            functionName: "transfer",
            args: [payments[i].address, parseUnits(`${i + 1}`, 6)],
          }),
          gas: 100_000n,
        });
        await chain.client.sendRawTransaction({
          serializedTransaction: await wallet.signTransaction(request),
        });
      }
      await chain.rpc("evm_mine", []);
    } finally {
      await chain.rpc("evm_setAutomine", [true]);
    }
    for (const payment of payments) await waitForStatus(m, payment.id, "paid");
    await paymentsSettled();
    const sweeps = new Set<string>();
    for (const payment of payments)
      for (const row of await sweepsOf(payment.address)) sweeps.add(row.tx_hash);
    expect(sweeps.size).toBe(1);
    const entries = (await m.call("/v1/reconciliation?type=payment")).json.data as Json[];
    expect(entries).toHaveLength(5);
    expect(new Set(entries.map((e) => e.transaction_hash))).toEqual(sweeps);
    expect(entries.map((e) => e.amount_decimal).sort()).toEqual(["1", "2", "3", "4", "5"]);
  });

  it("reverses a paid payment whose transfer and sweep a reorg took out", async () => {
    const m = await merchantOnTestChain();
    const chain = chainDriver(31337);
    const payment = await create(m, { amount_decimal: "4" });
    const sent = await pay(m, payment.id, "4");
    await waitForStatus(m, payment.id, "paid");
    await m.waitForEvents("payment.paid", 1, (o) => o.id === payment.id);
    const head = await chain.client.getBlockNumber();
    await chain.reorg(Number(head) - sent.block_number + 1, []);
    await chain.mine(2);
    const reversed = await waitForStatus(m, payment.id, "reversed");
    expect(reversed.amount_received_decimal).toBe("0");
    await waitFor(async () => (await retrieve(m, payment.id)).transfers.length === 0, {
      timeoutMs: 15_000,
      what: "the reorged transfer to disappear",
    });
    await m.waitForEvents("payment.reversed", 1, (o) => o.id === payment.id);
    await Promise.all([workerPassed("payment-reorgs"), paymentsSettled()]);
    expect(await eventsOf(m, payment.id)).toEqual(["payment.paid", "payment.reversed"]);
    // Paid again by a new transfer: payment.paid again, as a new event.
    await pay(m, payment.id, "4");
    await waitForStatus(m, payment.id, "paid");
    await m.waitForEvents("payment.paid", 2, (o) => o.id === payment.id);
    expect(await eventsOf(m, payment.id)).toEqual(["payment.paid", "payment.reversed", "payment.paid"]);
  });

  it("delivers payment events signed like Stripe's, verifiable with the endpoint's secret", async () => {
    const m = await merchantOnTestChain();
    const hooks = await startReceiver();
    receivers.push(hooks);
    const endpoint = await m.call("/v1/webhook_endpoints", { url: hooks.url, events: ["payment.paid"] });
    expect(endpoint.status, endpoint.text).toBe(200);
    const payment = await create(m, { amount_decimal: "1.5" });
    await pay(m, payment.id, "1.5");
    await waitFor(async () => hooks.received.some((r) => r.event.type === "payment.paid"), {
      timeoutMs: 30_000,
      what: "the payment.paid delivery",
    });
    const delivery = hooks.received.find((r) => r.event.type === "payment.paid");
    expect(delivery?.event.data.object).toMatchObject({ id: payment.id, status: "paid" });
    const header = String(delivery?.headers["x-service-signature"]);
    const verified = verifySignature({
      header,
      body: delivery?.raw ?? "",
      secrets: endpoint.json.secret,
      now: Math.floor(Date.now() / 1000),
    });
    // Stripe's scheme, checked independently: v1 = HMAC-SHA256(secret, `${t}.${raw body}`).
    const t = /t=(\d+)/.exec(header)?.[1];
    const expected = createHmac("sha256", endpoint.json.secret)
      .update(`${t}.`)
      .update(delivery?.raw ?? "")
      .digest("hex");
    expect(header).toContain(`v1=${expected}`);
    expect(verified.ok).toBe(true);
  });
});

describe("payments and chain flags", () => {
  it("takes payments on a chain closed to subscriptions", async () => {
    const { key } = await newMerchantWithKey("test");
    await api("/v1/merchant/chains", { key, body: { chain: 31339, payout_address: newAddress() } });
    const mandate = await api("/v1/mandates", {
      key,
      body: { cap_decimal: "5", period: "month", customer: "c" },
    });
    expect(mandate.json.error.code).toBe("chain_closed");
    const created = await api("/v1/payments", { key, body: { amount_decimal: "2" } });
    expect(created.status, created.text).toBe(200);
    expect(created.json.chain).toBe(31339);
    const paid = await api(`/v1/test/payments/${created.json.id}/pay`, {
      key,
      body: { amount_decimal: "2" },
    });
    expect(paid.status, paid.text).toBe(200);
    const chain = chainDriver(31339);
    await waitFor(
      async () => {
        await chain.mine(1);
        return (await api(`/v1/payments/${created.json.id}`, { key })).json.status === "paid";
      },
      { timeoutMs: 30_000, intervalMs: 300, what: "the payment on 31339 to be paid (2 confirmations)" },
    );
  });

  it("refuses a payment on a chain closed to payments, with the reason", async () => {
    const { key } = await newMerchantWithKey("live");
    await api("/v1/merchant/chains", { key, body: { chain: 31338, payout_address: newAddress() } });
    const refused = await api("/v1/payments", { key, body: { amount_decimal: "2", chain: 31338 } });
    expect(refused.status).toBe(400);
    expect(refused.json.error).toMatchObject({ code: "chain_closed", param: "chain" });
    expect(refused.json.error.message).toMatch(/payments_available is false/);
    const chains = await api("/v1/chains", { key });
    expect(chains.json.data.find((c: Json) => c.id === 31338)).toMatchObject({ payments_available: false });
  });

  it("describes the payment events in the event type catalogue", async () => {
    const types = (await api("/v1/event_types")).json.data as Array<{ type: string; description: string }>;
    for (const type of ["payment.paid", "payment.underpaid", "payment.reversed"])
      expect(types.find((t) => t.type === type)?.description).toMatch(/payment/);
  });
});
