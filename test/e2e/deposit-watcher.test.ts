/**
 * The deposit watcher on a stack of its own (thousands of open payments and a stopped service would
 * disturb the shared one). It reads every transfer of the tokens and looks the recipients up, so a
 * deposit is seen after an idle time (no cursor is kept while nothing is watched), to one payment among
 * 5,000 open ones (bulk-seeded rows, and one made through the API), and when it was mined while the
 * service was stopped, further below the head than the watcher's rescan by the time it starts again.
 */
import { randomUUID } from "node:crypto";
import { erc20Abi, getAddress, type Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { localChain, type ScratchStack, startScratchStack } from "../../scripts/stack/scratch-stack.ts";
import { seedOpenPayments } from "../../scripts/stack/seeded-payments.ts";
import type { RunningStack } from "../../scripts/stack/stack.ts";
import { workerPasses } from "../../scripts/stack/stack-metrics.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import { RESCAN_BLOCKS } from "../../service/payments/deposit-watcher.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import { newAddress, queryAt, withDatabase } from "./helpers.ts";

const CHAIN = 31337;
const OPEN_PAYMENTS = 5_000;

let scratch: ScratchStack;
let stack: RunningStack;
let chain: ReturnType<typeof chainDriver>;

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON bodies
type Json = any;

const query = <A extends object>(text: string, params: unknown[] = []) =>
  queryAt(stack.databaseUrl)<A>(text, params);

const call = async (path: string, body?: unknown) => {
  const response = await fetch(`${stack.apiUrl}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: {
      authorization: `Bearer ${stack.devMerchant.apiKey}`,
      ...(body === undefined ? {} : { "content-type": "application/json", "idempotency-key": randomUUID() }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  expect(response.status, text).toBe(200);
  return JSON.parse(text) as Json;
};

/** A whole pass of the watcher that began after the call (`billing_worker_passes_total`). */
const watcherPassed = async () => {
  const passes = () => workerPasses(stack, "deposit-watcher");
  const before = await passes();
  await waitFor(async () => (await passes()) >= before + 2, {
    timeoutMs: 30_000,
    what: "two passes of the deposit watcher",
  });
};

const cursor = async () =>
  (
    await query<{ block: string }>(
      "SELECT scanned_block::text AS block FROM billing.deposit_watch WHERE chain_id = $1",
      [CHAIN],
    )
  )[0]?.block;

/** A payer with gas and 100 USDC, sending plain transfers. */
const newPayer = async () => {
  const payer = await chain.newCustomer(usd("100"), { approve: false });
  return (to: string, amount: string) =>
    chain.call(payer, chain.usdc, erc20Abi, "transfer", [to, usd(amount)]);
};

/**
 * The payment once the watcher recorded `hash` for it, read afresh after the commit was seen (a payment
 * and its transfers are two reads, which a commit can fall between).
 */
const seen = async (id: string, hash: Hex) => {
  await waitFor(
    async () => (await call(`/v1/payments/${id}`)).transfers.some((t: Json) => t.transaction_hash === hash),
    { timeoutMs: 30_000, intervalMs: 100, what: `the transfer ${hash} on payment ${id}` },
  );
  return call(`/v1/payments/${id}`);
};

beforeAll(async () => {
  scratch = await startScratchStack("deposit-watcher", {
    chains: [localChain({ name: "Watcher chain", escrow_available: false, hold_seconds: 0 })],
    logLevel: "Error",
  });
  stack = scratch.stack;
  chain = chainDriver(CHAIN, stack.chainsFile);
}, 180_000);

afterAll(async () => {
  await scratch?.stop();
});

describe("deposit watcher", () => {
  it("sees the first payment's deposit after an idle time, during which it kept no cursor", async () => {
    await watcherPassed();
    expect(await cursor()).toBeUndefined();
    await chain.mine(40);
    await watcherPassed();
    expect(await cursor()).toBeUndefined();

    const payment = await call("/v1/payments", { amount_decimal: "5" });
    const pay = await newPayer();
    const sent = await pay(payment.address, "2");
    const after = await seen(payment.id, sent.hash);
    expect(after).toMatchObject({ status: "processing", amount_pending_decimal: "2" });
    expect(BigInt((await cursor()) ?? "0")).toBeGreaterThanOrEqual(sent.receipt.blockNumber);
  });

  it(`sees a deposit to one payment among ${OPEN_PAYMENTS.toLocaleString("en")} open ones, for that payment alone`, async () => {
    const head = await chain.client.getBlock();
    const seeded = await withDatabase(
      stack.databaseUrl,
      seedOpenPayments({
        merchantId: stack.devMerchant.merchantId,
        chainId: CHAIN,
        token: getAddress(chain.usdc),
        payee: newAddress(),
        operator: newAddress(),
        amount: 1_000_000n,
        expiresAt: Number(head.timestamp) + 86_400,
        createdBlock: head.number,
        first: 1,
        count: OPEN_PAYMENTS - 1,
        salt: randomUUID(),
      }),
    );
    expect(seeded).toHaveLength(OPEN_PAYMENTS - 1);
    const made = await call("/v1/payments", { amount_decimal: "5" });
    const [open] = await query<{ n: number }>(
      "SELECT count(*)::int AS n FROM billing.payments WHERE chain_id = $1 AND status = 'requires_payment'",
      [CHAIN],
    );
    expect(open?.n).toBe(OPEN_PAYMENTS);

    const pay = await newPayer();
    const toMade = await pay(made.address, "1.5");
    const target = seeded[Math.floor(seeded.length / 2)] as { id: string; address: string };
    const toSeeded = await pay(target.address, "0.25");
    expect(await seen(made.id, toMade.hash)).toMatchObject({
      status: "processing",
      amount_pending_decimal: "1.5",
    });
    expect(await seen(target.id, toSeeded.hash)).toMatchObject({
      status: "processing",
      amount_pending_decimal: "0.25",
    });
    // The watcher has read past both blocks: no other open payment received anything.
    expect(BigInt((await cursor()) ?? "0")).toBeGreaterThanOrEqual(toSeeded.receipt.blockNumber);
    const recorded = await query<{ payment_id: string }>(
      "SELECT payment_id FROM billing.payment_transfers WHERE block_number > $1",
      [head.number.toString()],
    );
    expect(recorded.map((r) => r.payment_id).sort()).toEqual([made.id, target.id].sort());
  });

  it("sees a deposit mined while the service was stopped, below the rescan by the time it starts again", async () => {
    const payment = await call("/v1/payments", { amount_decimal: "5" });
    const pay = await newPayer();
    await watcherPassed();
    const stopped: { cursor?: string; sent?: Awaited<ReturnType<typeof pay>> } = {};
    await stack.restartService(async () => {
      stopped.cursor = await cursor();
      stopped.sent = await pay(payment.address, "3");
      await chain.mine(Number(RESCAN_BLOCKS) * 3);
    });
    const { sent, cursor: stoppedAt } = stopped;
    if (sent === undefined) throw new Error("nothing was sent while the service was stopped");
    // Mined after the last pass before the stop, and out of reach of a watcher reading only the last
    // RESCAN_BLOCKS below the head it found.
    expect(sent.receipt.blockNumber).toBeGreaterThan(BigInt(stoppedAt ?? "0"));
    expect((await chain.client.getBlockNumber()) - sent.receipt.blockNumber).toBeGreaterThan(RESCAN_BLOCKS);
    expect(await seen(payment.id, sent.hash)).toMatchObject({
      status: "processing",
      amount_pending_decimal: "3",
    });
  });
});
