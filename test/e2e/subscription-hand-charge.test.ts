/**
 * A subscription's period charged by hand (`POST /v1/mandates/{id}/charges`) before billing reached it.
 * The escrow takes one charge per period, so billing settles the period's invoice with that charge: paid
 * when it covers the total, otherwise left open with what it paid (docs/subscriptions.md, "A period
 * charged by hand"): `invoice.payment_failed` once, no retry in the period, uncollectible at the next
 * boundary without ending the subscription, whose next period is billed as usual.
 *
 * The hand charge must come first. The billing worker locks due subscriptions with SKIP LOCKED, so the
 * test holds their rows locked while it moves the clock past the boundary and charges: billing cannot
 * reach them meanwhile (checked: no invoice of the new period exists when the charges have answered).
 */
import { getAbiItem, type Hex } from "viem";
import { describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { periodStart } from "../../src/ledger/period.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import { type EventOf, holdInTransaction, merchantOnTestChain, query } from "./helpers.ts";

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON bodies
type Json = any;
type Merchant = Awaited<ReturnType<typeof merchantOnTestChain>>;

/** Locks the subscriptions' rows in a transaction of the test's own; resolves to its release. */
const holdSubscriptions = (ids: readonly string[]) =>
  holdInTransaction(
    (sql) => sql`SELECT id FROM billing.subscriptions WHERE id = ANY (${ids}::text[]) FOR UPDATE`,
  );

const chargedLogs = async (mandateOnchainId: Hex) => {
  const chain = chainDriver(31337);
  const logs = await chain.client.getLogs({
    address: chain.escrow,
    event: getAbiItem({ abi: MandateEscrowAbi, name: "Charged" }),
    args: { mandateId: mandateOnchainId },
    fromBlock: 0n,
    toBlock: "latest",
  });
  return logs.map((log) => ({ period: Number(log.args.period), amount: log.args.amount }));
};

/** A subscription of `price`, authorised and funded, its period 0 paid. */
const subscribed = async (m: Merchant, price: string, cap?: string) => {
  const created = await m.call("/v1/subscriptions", {
    customer: `cus_${price}_${cap ?? "default"}`,
    price,
    ...(cap === undefined ? {} : { cap_decimal: cap }),
  });
  expect(created.status, created.text).toBe(200);
  const sub = created.json as Json;
  expect((await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "100" })).status).toBe(200);
  expect((await m.call(`/v1/test/mandates/${sub.mandate}/authorize`, {})).status).toBe(200);
  await m.waitForEvents("invoice.paid", 1, (o) => o.subscription === sub.id && o.period === 0);
  const mandate = (await m.call(`/v1/mandates/${sub.mandate}`)).json as Json;
  return {
    id: sub.id as string,
    mandate: mandate.id as string,
    onchain: mandate.onchain_id as Hex,
    anchor: mandate.anchor as number,
  };
};

const invoiceOf = async (m: Merchant, subscription: string, period: number) =>
  ((await m.call(`/v1/invoices?subscription=${subscription}&limit=100`)).json.data as Json[]).find(
    (invoice) => invoice.period === period,
  );

describe("a subscription's period charged by hand before billing", () => {
  it("pays the invoice when the charge covers it, leaves it open and partly paid when it does not", async () => {
    const m = await merchantOnTestChain();
    const price = await m.call("/v1/prices", { product_name: "Plan", amount_decimal: "5", chain: 31337 });
    expect(price.status, price.text).toBe(200);
    const equal = await subscribed(m, price.json.id);
    const short = await subscribed(m, price.json.id);
    const more = await subscribed(m, price.json.id, "8");
    const subs = [equal, short, more];

    // Past the next boundary of all three (they were opened within seconds), billing held off.
    const release = await holdSubscriptions(subs.map((s) => s.id));
    let handCharges: Json[];
    try {
      const now = Number((await chainDriver(31337).client.getBlock()).timestamp);
      const boundary = Math.max(...subs.map((s) => periodStart(s.anchor, 1)));
      expect((await m.advance(boundary - now + 60)).status).toBe(200);
      handCharges = [];
      for (const [sub, amount] of [
        [equal, "5"],
        [short, "3"],
        [more, "7"],
      ] as const) {
        const charged = await m.call(`/v1/mandates/${sub.mandate}/charges`, { amount_decimal: amount });
        expect(charged.status, charged.text).toBe(200);
        expect(charged.json).toMatchObject({ status: "pending", period: 1 });
        handCharges.push(charged.json);
      }
      // The marker that the hand charges came first: no invoice of period 1 yet.
      for (const sub of subs) expect(await invoiceOf(m, sub.id, 1)).toBeUndefined();
    } finally {
      await release();
    }
    const [equalCharge, shortCharge, moreCharge] = handCharges as [Json, Json, Json];

    // Equal: paid by the hand charge.
    const [paidEqual] = await m.waitForEvents(
      "invoice.paid",
      1,
      (o) => o.subscription === equal.id && o.period === 1,
    );
    expect(paidEqual?.data.object).toMatchObject({
      status: "paid",
      charge: equalCharge.id,
      total_decimal: "5",
      amount_paid_decimal: "5",
      amount_remaining_decimal: "0",
      failure_code: null,
    });
    // More than the invoice (the cap allows 8): paid; the charge keeps the rest, nothing is credited on.
    const [paidMore] = await m.waitForEvents(
      "invoice.paid",
      1,
      (o) => o.subscription === more.id && o.period === 1,
    );
    expect(paidMore?.data.object).toMatchObject({
      status: "paid",
      charge: moreCharge.id,
      amount_paid_decimal: "5",
      amount_remaining_decimal: "0",
    });
    // Less: open with what was paid, one payment_failed, no retry.
    const [failed] = await m.waitForEvents(
      "invoice.payment_failed",
      1,
      (o) => o.subscription === short.id && o.period === 1,
    );
    expect(failed?.data.object).toMatchObject({
      status: "open",
      charge: shortCharge.id,
      total_decimal: "5",
      amount_paid_decimal: "3",
      amount_remaining_decimal: "2",
      failure_code: "period_already_charged",
      next_payment_attempt: null,
    });
    expect((await m.call(`/v1/subscriptions/${short.id}`)).json.status).toBe("past_due");
    expect((await m.call(`/v1/subscriptions/${equal.id}`)).json.status).toBe("active");

    // The next boundary: the short invoice can no longer be collected, the subscription goes on.
    const now = Number((await chainDriver(31337).client.getBlock()).timestamp);
    const next = Math.max(...subs.map((s) => periodStart(s.anchor, 2)));
    expect((await m.advance(next - now + 60)).status).toBe(200);
    for (const sub of subs)
      await m.waitForEvents("invoice.paid", 1, (o) => o.subscription === sub.id && o.period === 2);
    expect(await invoiceOf(m, short.id, 1)).toMatchObject({
      status: "uncollectible",
      amount_paid_decimal: "3",
      amount_remaining_decimal: "2",
      failure_code: "period_already_charged",
    });
    expect((await m.call(`/v1/subscriptions/${short.id}`)).json.status).toBe("active");

    // Each period charged once, at the amounts above: the short period was never retried.
    expect(await chargedLogs(equal.onchain)).toEqual([
      { period: 0, amount: usd("5") },
      { period: 1, amount: usd("5") },
      { period: 2, amount: usd("5") },
    ]);
    expect(await chargedLogs(short.onchain)).toEqual([
      { period: 0, amount: usd("5") },
      { period: 1, amount: usd("3") },
      { period: 2, amount: usd("5") },
    ]);
    expect(await chargedLogs(more.onchain)).toEqual([
      { period: 0, amount: usd("5") },
      { period: 1, amount: usd("7") },
      { period: 2, amount: usd("5") },
    ]);
    const failures = (await m.events("invoice.payment_failed")).filter(
      (e: EventOf) => e.data.object.subscription === short.id,
    );
    expect(failures).toHaveLength(1);
    const [charges] = await query<{ n: number }>(
      "SELECT count(*)::int AS n FROM billing.charges WHERE mandate_id = $1 AND period = 1",
      [short.mandate],
    );
    expect(charges?.n).toBe(1);
  });
});
