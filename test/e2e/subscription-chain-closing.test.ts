/**
 * "Closing a chain stops new subscriptions only: existing ones keep being billed and none is cancelled."
 *
 * A second service process, on the stack's database and indexer, runs with a chains file in which
 * chain 31339 is still open to subscriptions. Through it a merchant configures 31339, creates prices (one
 * metered) and a coupon there and opens three subscriptions, which are funded, authorised and paid for
 * their first period. Then that process is stopped: the operator has closed the chain, and only the
 * stack's own service remains, whose config says `subscriptions_available: false` for 31339. That
 * service refuses a new subscription and a new mandate on 31339 (400 `chain_closed`, nothing created),
 * still takes usage for the metered one, and bills all three for the next two periods: one invoice per
 * subscription and period, each paid for exactly the expected amount by a charge of that period, as the
 * escrow's `Charged` logs on 31339 confirm; every subscription stays `active` and none is canceled.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { getAbiItem, type Hex } from "viem";
import { afterAll, describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { freePort, waitFor } from "../../scripts/stack/wait.ts";
import { periodIndexAt, periodStart } from "../../src/ledger/period.ts";
import { chainDriver } from "./chain-driver.ts";
import {
  type ApiResponse,
  api,
  expectErrorShape,
  newAddress,
  newMerchantWithKey,
  query,
  stack,
} from "./helpers.ts";

const CLOSED = 31339;

const cleanups: Array<() => void> = [];
afterAll(() => {
  for (const cleanup of cleanups.reverse()) cleanup();
});

/** The same calls as `api`, against another process's base URL. */
const apiAt = (baseUrl: string, key: string, path: string, body?: unknown): Promise<ApiResponse> =>
  api(path, body === undefined ? { key, baseUrl } : { key, baseUrl, body });

/** A second `service/main.ts` on the stack's database, with chain 31339 open to subscriptions. */
const startProcessWithChainOpen = async () => {
  const dir = mkdtempSync(join(tmpdir(), "chain-open-"));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  const config = JSON.parse(readFileSync(stack().chainsFile, "utf8")) as {
    chains: Array<{ id: number; subscriptions_available: boolean }>;
  };
  const closed = config.chains.find((chain) => chain.id === CLOSED);
  if (!closed) throw new Error(`no chain ${CLOSED} in ${stack().chainsFile}`);
  expect(closed.subscriptions_available).toBe(false);
  closed.subscriptions_available = true;
  const file = join(dir, "chains.json");
  writeFileSync(file, JSON.stringify(config, null, 2));

  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, ["service/main.ts"], {
    env: {
      ...process.env,
      DATABASE_URL: stack().databaseUrl,
      CHAINS_CONFIG: file,
      WEBHOOK_SECRETS_KEY: stack().webhookSecretsKey,
      // A replica of the local stack, which alone lets test-mode webhooks reach loopback receivers.
      WEBHOOK_TEST_ALLOW_PRIVATE_URLS: "true",
      PONDER_URL: stack().ponderUrl,
      PORT: String(port),
      // Opening a mandate names the relayer as its operator: the same local key as the stack's service.
      RELAYER_PRIVATE_KEY: stack().relayerKey,
      LOG_FORMAT: "json",
    },
    stdio: "ignore",
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  cleanups.push(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${url}/ready`).catch(() => undefined))?.status === 200, {
    timeoutMs: 60_000,
    intervalMs: 200,
    what: `the service process with chain ${CLOSED} open`,
  });
  return {
    url,
    stop: async () => {
      child.kill("SIGTERM");
      return exited;
    },
  };
};

interface Opened {
  readonly name: string;
  readonly id: string;
  readonly mandate: string;
  readonly anchor: number;
  /** Expected invoice totals by period, in base units. */
  readonly totals: bigint[];
}

describe("a chain closed to subscriptions", () => {
  it("refuses new subscriptions there but keeps billing the existing ones, cancelling none", async () => {
    const chain = chainDriver(CLOSED);
    // 31339 reports a log 2 blocks deep: keep blocks coming so authorisations and charges are confirmed.
    const miner = setInterval(() => void chain.mine(1).catch(() => undefined), 300);
    cleanups.push(() => clearInterval(miner));

    const { key, merchantId } = await newMerchantWithKey("test");
    const stackCall = (path: string, body?: unknown) =>
      api(path, body === undefined ? { key } : { key, body });

    const open = await startProcessWithChainOpen();
    const openCall = (path: string, body?: unknown) => apiAt(open.url, key, path, body);

    // The two processes disagree about 31339, exactly as their config files say.
    const availability = async (call: typeof openCall) =>
      ((await call("/v1/chains")).json.data as Array<{ id: number; subscriptions_available: boolean }>).find(
        (c) => c.id === CLOSED,
      )?.subscriptions_available;
    expect(await availability(openCall)).toBe(true);
    expect(await availability(stackCall)).toBe(false);

    // --- While the chain is open: catalogue and three subscriptions, through the open process.
    const configured = await openCall("/v1/merchant/chains", { chain: CLOSED, payout_address: newAddress() });
    expect(configured.status, configured.text).toBe(200);
    const seat = await openCall("/v1/prices", { product_name: "Seat", amount_decimal: "2.5", chain: CLOSED });
    expect(seat.status, seat.text).toBe(200);
    const meteredPrice = await openCall("/v1/prices", {
      product_name: "API",
      amount_decimal: "1",
      chain: CLOSED,
      usage: { unit_amount_decimal: "0.25", unit: "call" },
    });
    expect(meteredPrice.status, meteredPrice.text).toBe(200);
    const halfOff = await openCall("/v1/coupons", { percent_off: 50, duration_in_months: 1 });
    expect(halfOff.status, halfOff.text).toBe(200);

    const specs = [
      { name: "plain", body: { price: seat.json.id } },
      { name: "discounted", body: { price: seat.json.id, coupon: halfOff.json.id } },
      { name: "metered", body: { price: meteredPrice.json.id, cap_decimal: "5" } },
    ];
    const subs: Opened[] = [];
    for (const spec of specs) {
      const created = await openCall("/v1/subscriptions", { customer: `cus_${spec.name}`, ...spec.body });
      expect(created.status, created.text).toBe(200);
      expect(created.json).toMatchObject({ status: "incomplete", chain: CLOSED });
      const funded = await openCall(`/v1/test/mandates/${created.json.mandate}/fund`, {
        amount_decimal: "50",
      });
      expect(funded.status, funded.text).toBe(200);
      const authorized = await openCall(`/v1/test/mandates/${created.json.mandate}/authorize`, {});
      expect(authorized.status, authorized.text).toBe(200);
      subs.push({
        name: spec.name,
        id: created.json.id,
        mandate: created.json.mandate,
        anchor: authorized.json.anchor,
        totals: [],
      });
    }
    const [plain, discounted, metered] = subs as [Opened, Opened, Opened];
    // Period 0: the price, half off for the discounted one, no usage yet.
    plain.totals.push(2_500_000n);
    discounted.totals.push(1_250_000n);
    metered.totals.push(1_000_000n);

    const invoicesOf = (sub: Opened) =>
      query<{
        period: number;
        status: string;
        total: string;
        charge_period: number | null;
        charge_status: string | null;
        charge_chain: string | null;
      }>(
        `SELECT i.period, i.status, i.total::text AS total, c.period AS charge_period, c.status AS charge_status,
           c.chain_id::text AS charge_chain
         FROM billing.invoices i LEFT JOIN billing.charges c ON c.id = i.charge_id
         WHERE i.subscription_id = $1 ORDER BY i.period`,
        [sub.id],
      );
    const paidFor = async (period: number) => {
      for (const sub of subs) {
        const rows = await invoicesOf(sub);
        if (rows.find((r) => r.period === period)?.status !== "paid") return false;
      }
      return true;
    };
    await waitFor(() => paidFor(0), { timeoutMs: 90_000, intervalMs: 250, what: "the first invoices paid" });

    // --- The operator closes the chain: only the stack's service, whose config says so, remains.
    await open.stop();
    await waitFor(async () => (await fetch(`${open.url}/ready`).catch(() => undefined)) === undefined, {
      timeoutMs: 10_000,
      what: "the open process to be gone",
    });

    const counts = async () =>
      (
        await query<{ subscriptions: string; mandates: string }>(
          `SELECT (SELECT count(*) FROM billing.subscriptions WHERE merchant_id = $1)::text AS subscriptions,
                  (SELECT count(*) FROM billing.mandates WHERE merchant_id = $1)::text AS mandates`,
          [merchantId],
        )
      )[0];
    const before = await counts();
    expect(before).toEqual({ subscriptions: "3", mandates: "3" });

    const refused = await stackCall("/v1/subscriptions", { customer: "cus_new", price: seat.json.id });
    expect(refused.status, refused.text).toBe(400);
    const error = expectErrorShape(refused.json);
    expect(error).toMatchObject({ type: "invalid_request_error", code: "chain_closed", param: "price" });
    expect(error.message).toMatch(/subscriptions_available is false/);
    const refusedMandate = await stackCall("/v1/mandates", {
      cap_decimal: "5",
      period: "month",
      customer: "cus_new",
      chain: CLOSED,
    });
    expect(refusedMandate.status, refusedMandate.text).toBe(400);
    expect(expectErrorShape(refusedMandate.json)).toMatchObject({ code: "chain_closed", param: "chain" });
    expect(await counts()).toEqual(before);
    const listed = (await stackCall("/v1/merchant/chains")).json.data as Array<Record<string, unknown>>;
    expect(listed.find((c) => c.chain === CLOSED)).toMatchObject({ subscriptions_available: false });

    // Usage still counts on a closed chain: 4 calls in period 0, billed with period 1's invoice.
    const usage1 = await stackCall(`/v1/subscriptions/${metered.id}/usage_records`, { quantity: 4 });
    expect(usage1.status, usage1.text).toBe(200);
    expect(usage1.json).toMatchObject({ period: 0, status: "billable" });
    plain.totals.push(2_500_000n);
    discounted.totals.push(2_500_000n); // the coupon covered one month
    metered.totals.push(1_000_000n + 4n * 250_000n);

    // --- Two more periods on the closed chain, moving its clock just past each boundary.
    for (const period of [1, 2]) {
      const now = Number((await chain.client.getBlock()).timestamp);
      const target = Math.max(...subs.map((s) => periodStart(s.anchor, period))) + 120;
      const advanced = await stackCall("/v1/test/clock/advance", { seconds: target - now, chain: CLOSED });
      expect(advanced.status, advanced.text).toBe(200);
      expect(advanced.json).toMatchObject({ chain: CLOSED });
      for (const sub of subs) expect(periodIndexAt(sub.anchor, advanced.json.now)).toBe(period);
      await waitFor(() => paidFor(period), {
        timeoutMs: 90_000,
        intervalMs: 250,
        what: `period ${period} paid on the closed chain`,
      });
      if (period === 1) {
        const usage2 = await stackCall(`/v1/subscriptions/${metered.id}/usage_records`, { quantity: 2 });
        expect(usage2.json, usage2.text).toMatchObject({ period: 1, status: "billable" });
        plain.totals.push(2_500_000n);
        discounted.totals.push(2_500_000n);
        metered.totals.push(1_000_000n + 2n * 250_000n);
      }
    }

    // --- Every subscription: active, one paid invoice per period for the expected amount, each settled by
    //     a charge of its own period on 31339, and the escrow's Charged logs say the same.
    const charged = getAbiItem({ abi: MandateEscrowAbi, name: "Charged" });
    for (const sub of subs) {
      const read = await stackCall(`/v1/subscriptions/${sub.id}`);
      expect(read.json, sub.name).toMatchObject({
        status: "active",
        canceled_at: null,
        cancellation_reason: null,
        cancel_at_period_end: false,
        chain: CLOSED,
      });
      expect(read.json.current_period?.index, sub.name).toBe(2);

      const invoices = await invoicesOf(sub);
      expect(
        invoices.map((i) => ({ period: i.period, status: i.status, total: i.total })),
        sub.name,
      ).toEqual(sub.totals.map((total, period) => ({ period, status: "paid", total: total.toString() })));
      for (const invoice of invoices)
        expect(invoice, `${sub.name} period ${invoice.period}`).toMatchObject({
          charge_period: invoice.period,
          charge_chain: String(CLOSED),
        });
      expect(invoices.every((i) => ["succeeded", "released"].includes(i.charge_status ?? ""))).toBe(true);

      const [mandate] = await query<{ onchain_id: Hex }>(
        "SELECT onchain_id FROM billing.mandates WHERE id = $1",
        [sub.mandate],
      );
      const logs = await chain.client.getLogs({
        address: chain.escrow,
        event: charged,
        args: { mandateId: mandate?.onchain_id as Hex },
        fromBlock: 0n,
        toBlock: "latest",
      });
      expect(
        logs.map((log) => ({ period: log.args.period, amount: log.args.amount })),
        `${sub.name}: the chain's charges`,
      ).toEqual(sub.totals.map((amount, period) => ({ period, amount })));
    }

    // No subscription of this merchant was canceled, and every invoice was reported paid.
    const events = async (type: string) =>
      ((await stackCall(`/v1/events?type=${type}&limit=100`)).json.data as unknown[]).length;
    expect(await events("subscription.canceled")).toBe(0);
    expect(await events("invoice.paid")).toBe(9);
    expect(await events("invoice.payment_failed")).toBe(0);
  }, 420_000);
});
