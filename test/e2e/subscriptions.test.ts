/**
 * Prices, coupons and subscriptions end to end on the real stack: the catalogue's rules, and a
 * subscription billed month by month by the billing worker as the test clock moves the chain, through a
 * discount, a failed charge with its retry, and a cancellation at period end.
 */
import { decodeFunctionData, type Hex } from "viem";
import { describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import { api, expectErrorShape, merchantOnTestChain, newAddress, query } from "./helpers.ts";

const DAY = 86_400;
const MONTH = 31 * DAY;

const merchant = merchantOnTestChain;

describe("catalogue", () => {
  it("creates, lists, reads and deactivates prices, and refuses bad ones with nothing created", async () => {
    const m = await merchant();
    const created = await m.call("/v1/prices", { product_name: "Pro plan", amount_decimal: "19.99" });
    expect(created.status, created.text).toBe(200);
    expect(created.json).toMatchObject({
      object: "price",
      livemode: false,
      active: true,
      product_name: "Pro plan",
      chain: 31337,
      token: "USDC",
      interval: "month",
      amount_decimal: "19.99",
      usage: null,
    });
    expect(created.json.id).toMatch(/^price_/);
    const metered = await m.call("/v1/prices", {
      product_name: "API",
      amount_decimal: "0",
      usage: { unit_amount_decimal: "0.002", unit: "call" },
    });
    expect(metered.status, metered.text).toBe(200);
    expect(metered.json).toMatchObject({
      amount_decimal: "0",
      usage: { unit_amount_decimal: "0.002", unit: "call" },
    });

    for (const [body, param] of [
      [{ product_name: "x", amount_decimal: "abc" }, "amount_decimal"],
      [{ product_name: "x", amount_decimal: "0" }, "amount_decimal"],
      [{ product_name: "x", amount_decimal: "1.0000001" }, "amount_decimal"],
      [{ product_name: "x", amount_decimal: "1", token: "DAI" }, "token"],
      [{ product_name: "x", amount_decimal: "1", chain: 1 }, "chain"],
      [
        { product_name: "x", amount_decimal: "1", usage: { unit_amount_decimal: "-1", unit: "u" } },
        "usage.unit_amount_decimal",
      ],
    ] as const) {
      const refused = await m.call("/v1/prices", body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(expectErrorShape(refused.json).param).toBe(param);
    }
    expect((await m.call("/v1/prices")).json.data).toHaveLength(2);

    const deactivated = await m.call(`/v1/prices/${created.json.id}`, { active: false });
    expect(deactivated.json.active).toBe(false);
    expect((await m.call("/v1/prices?active=true")).json.data.map((p: { id: string }) => p.id)).toEqual([
      metered.json.id,
    ]);
    const refused = await m.call("/v1/subscriptions", { customer: "c", price: created.json.id });
    expect(refused.status).toBe(400);
    expect(expectErrorShape(refused.json)).toMatchObject({ code: "price_inactive", param: "price" });
    const stranger = await merchant();
    expect((await stranger.call(`/v1/prices/${created.json.id}`)).status).toBe(404);
  });

  it("creates coupons (percent or amount) and refuses ambiguous ones", async () => {
    const m = await merchant();
    const percent = await m.call("/v1/coupons", { percent_off: 12.5, duration_in_months: 3 });
    expect(percent.status, percent.text).toBe(200);
    expect(percent.json).toMatchObject({
      object: "coupon",
      percent_off: 12.5,
      amount_off_decimal: null,
      duration_in_months: 3,
    });
    const amount = await m.call("/v1/coupons", {
      amount_off_decimal: "5",
      token: "USDC",
      duration_in_months: 1,
    });
    expect(amount.json).toMatchObject({ percent_off: null, amount_off_decimal: "5", token: "USDC" });
    for (const body of [
      { duration_in_months: 3 },
      { percent_off: 10, amount_off_decimal: "1", token: "USDC", duration_in_months: 3 },
      { percent_off: 10.005, duration_in_months: 3 },
      { percent_off: 101, duration_in_months: 3 },
      { percent_off: 10, duration_in_months: 0 },
      { amount_off_decimal: "5", duration_in_months: 1 },
      { amount_off_decimal: "0", token: "USDC", duration_in_months: 1 },
    ]) {
      const refused = await m.call("/v1/coupons", body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expectErrorShape(refused.json);
    }
    expect((await m.call("/v1/coupons")).json.data).toHaveLength(2);
  });
});

describe("subscriptions", () => {
  it("refuses a closed chain, a missing cap for a metered price, a cap below the price and unknown references", async () => {
    const m = await merchant();
    await m.call("/v1/merchant/chains", { chain: 31339, payout_address: newAddress() });
    const closedPrice = await m.call("/v1/prices", { product_name: "x", amount_decimal: "5", chain: 31339 });
    expect(closedPrice.status, closedPrice.text).toBe(200);
    const closed = await m.call("/v1/subscriptions", { customer: "c", price: closedPrice.json.id });
    expect(closed.status).toBe(400);
    expect(expectErrorShape(closed.json).code).toBe("chain_closed");
    expect(closed.json.error.message).toMatch(/subscriptions_available is false/);

    const price = await m.call("/v1/prices", { product_name: "x", amount_decimal: "5", chain: 31337 });
    const metered = await m.call("/v1/prices", {
      product_name: "m",
      amount_decimal: "1",
      chain: 31337,
      usage: { unit_amount_decimal: "0.1", unit: "u" },
    });
    const cases = [
      [{ customer: "c", price: metered.json.id }, "parameter_missing"],
      [{ customer: "c", price: price.json.id, cap_decimal: "4.99" }, "cap_too_low"],
      [{ customer: "c", price: "price_01JD3ZZZZZZZZZZZZZZZZZZZZZ" }, "resource_missing"],
      [{ customer: "c", price: price.json.id, coupon: "cpn_01JD3ZZZZZZZZZZZZZZZZZZZZZ" }, "resource_missing"],
    ] as const;
    for (const [body, code] of cases) {
      const refused = await m.call("/v1/subscriptions", body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(expectErrorShape(refused.json).code).toBe(code);
    }
    expect((await m.call("/v1/subscriptions")).json.data).toHaveLength(0);
    expect((await m.call("/v1/mandates")).json.data).toHaveLength(0);
  });

  it("bills each month through a discount, a failed charge and its retry, and ends at period end", async () => {
    const m = await merchant();
    const price = await m.call("/v1/prices", { product_name: "Team", amount_decimal: "10", chain: 31337 });
    const coupon = await m.call("/v1/coupons", { percent_off: 50, duration_in_months: 2 });
    const created = await m.call("/v1/subscriptions", {
      customer: "cus_team",
      price: price.json.id,
      coupon: coupon.json.id,
    });
    expect(created.status, created.text).toBe(200);
    const sub = created.json;
    expect(sub).toMatchObject({
      object: "subscription",
      status: "incomplete",
      customer: "cus_team",
      price: price.json.id,
      chain: 31337,
      token: "USDC",
      cap_decimal: "10",
      discount: { coupon: coupon.json.id, start_period: null, end_period: null },
      current_period: null,
      latest_invoice: null,
    });
    expect(sub.authorization_url).toMatch(/\/authorize\//);
    const mandate = (await m.call(`/v1/mandates/${sub.mandate}`)).json;
    expect(mandate).toMatchObject({ cap_decimal: "10", reference: sub.id, status: "pending" });

    // The customer authorises with 15 in the wallet: period 0 is invoiced at once, half off.
    await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "15" });
    expect((await m.call(`/v1/test/mandates/${sub.mandate}/authorize`, {})).status).toBe(200);
    const [first] = await m.waitForEvents("invoice.paid", 1, (o) => o.subscription === sub.id);
    expect(first?.data.object).toMatchObject({
      object: "invoice",
      status: "paid",
      period: 0,
      subtotal_decimal: "10",
      discount_decimal: "5",
      total_decimal: "5",
      amount_paid_decimal: "5",
      attempt_count: 1,
      lines: [
        { kind: "price", description: "Team", quantity: "1", amount_decimal: "10" },
        { kind: "discount", amount_decimal: "-5" },
      ],
    });
    const active = (await m.call(`/v1/subscriptions/${sub.id}`)).json;
    expect(active).toMatchObject({ status: "active", discount: { start_period: 0, end_period: 2 } });
    expect(active.current_period.index).toBe(0);

    // Month 1: still discounted.
    await m.advance(MONTH);
    await m.waitForEvents("invoice.paid", 2, (o) => o.subscription === sub.id);

    // Month 2: the discount has ended; 5 left cannot cover 10.
    await m.advance(MONTH);
    const [failed] = await m.waitForEvents("invoice.payment_failed", 1, (o) => o.subscription === sub.id);
    expect(failed?.data.object).toMatchObject({
      status: "open",
      period: 2,
      total_decimal: "10",
      attempt_count: 1,
    });
    const failedCharge = (await m.call(`/v1/charges/${failed?.data.object.charge}`)).json;
    expect(failedCharge).toMatchObject({ status: "failed", failure_code: "insufficient_funds" });
    const pastDue = (await m.call(`/v1/subscriptions/${sub.id}`)).json;
    expect(pastDue.status).toBe("past_due");
    const retryAt = failed?.data.object.next_payment_attempt as number;
    expect(retryAt - (pastDue.current_period.start as number)).toBeGreaterThanOrEqual(DAY);

    // Topped up: the retry a day later succeeds and the subscription is active again.
    await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "20" });
    await m.advance(DAY + 60);
    await m.waitForEvents("invoice.paid", 3, (o) => o.subscription === sub.id);
    await waitFor(async () => (await m.call(`/v1/subscriptions/${sub.id}`)).json.status === "active", {
      timeoutMs: 10_000,
      what: "active again",
    });

    // Cancel at period end: no invoice for month 3.
    const canceling = await m.call(`/v1/subscriptions/${sub.id}/cancel`, { at_period_end: true });
    expect(canceling.json).toMatchObject({ status: "active", cancel_at_period_end: true });
    await m.advance(MONTH);
    const [ended] = await m.waitForEvents("subscription.canceled", 1, (o) => o.id === sub.id);
    expect(ended?.data.object).toMatchObject({ status: "canceled", cancellation_reason: "requested" });

    const invoices = (await m.call(`/v1/invoices?subscription=${sub.id}&limit=100`)).json.data as Array<{
      period: number;
      status: string;
      total_decimal: string;
    }>;
    expect(invoices.map((i) => [i.period, i.status, i.total_decimal])).toEqual([
      [2, "paid", "10"],
      [1, "paid", "5"],
      [0, "paid", "5"],
    ]);
    const rows = await query<{ n: string }>(
      "SELECT count(*)::text AS n FROM billing.invoices WHERE subscription_id = $1",
      [sub.id],
    );
    expect(rows[0]?.n).toBe("3");
    const again = await m.call(`/v1/subscriptions/${sub.id}/cancel`, {});
    expect(expectErrorShape(again.json).code).toBe("subscription_canceled");
  });

  it("moves on chain exactly what a boundary's chargeMany invoiced, and the releases pay it to the merchant", async () => {
    const m = await merchant();
    const chain = chainDriver(31337);
    const subscriptions: Array<{ id: string; mandate: string; customer: Hex; amount: string }> = [];
    for (const amount of ["4", "7.5", "12.25"]) {
      const price = await m.call("/v1/prices", { product_name: `Plan ${amount}`, amount_decimal: amount });
      const sub = (await m.call("/v1/subscriptions", { customer: `cus_${amount}`, price: price.json.id }))
        .json;
      const funded = await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "50" });
      expect((await m.call(`/v1/test/mandates/${sub.mandate}/authorize`, {})).status).toBe(200);
      subscriptions.push({
        id: sub.id,
        mandate: sub.mandate,
        customer: funded.json.customer_address,
        amount,
      });
    }
    const ours = (o: Record<string, unknown>) => subscriptions.some((sub) => sub.id === o.subscription);
    await m.waitForEvents("invoice.paid", 3, ours);
    const invoicesOf = async (period: number) =>
      (
        await Promise.all(
          subscriptions.map(
            async (sub) => (await m.call(`/v1/invoices?subscription=${sub.id}&limit=100`)).json.data,
          ),
        )
      ).map((list) =>
        (list as Array<{ period: number; charge: string; total_decimal: string }>).find(
          (i) => i.period === period,
        ),
      );
    const chargeOf = async (id: string | undefined) => (await m.call(`/v1/charges/${id}`)).json;
    const customersBefore = await Promise.all(subscriptions.map((sub) => chain.balanceOf(sub.customer)));

    // The boundary: one chargeMany takes each customer's invoice total to the escrow, and nothing more.
    await m.advance(MONTH);
    await m.waitForEvents("invoice.paid", 6, ours);
    const boundary = await invoicesOf(1);
    const charged = await Promise.all(boundary.map((invoice) => chargeOf(invoice?.charge)));
    // One chargeMany for the boundary's batch (a larger boundary of the shared chain may split it).
    const hashes = [...new Set(charged.map((c) => c.onchain.transaction_hash as Hex))];
    const calls = await Promise.all(
      hashes.map(async (hash) => {
        const sent = await chain.client.getTransaction({ hash });
        return decodeFunctionData({ abi: MandateEscrowAbi, data: sent.input }).functionName;
      }),
    );
    expect(calls).toContain("chargeMany");
    const transfers = (await Promise.all(hashes.map((hash) => chain.usdcTransfers(hash)))).flat();
    for (const [i, sub] of subscriptions.entries()) {
      const total = usd(boundary[i]?.total_decimal ?? "-1");
      expect(total).toBe(usd(sub.amount));
      const fromCustomer = transfers.filter((t) => t.from === sub.customer.toLowerCase());
      expect(fromCustomer.map((t) => [t.to, t.value])).toEqual([[chain.escrow.toLowerCase(), total]]);
      expect((customersBefore[i] ?? 0n) - (await chain.balanceOf(sub.customer))).toBe(total);
    }
    const boundarySum = boundary.reduce((sum, invoice) => sum + usd(invoice?.total_decimal ?? "0"), 0n);
    expect(boundarySum).toBe(usd("23.75"));

    // The holds end: the payout address receives exactly the boundary's sum (period 0's were released
    // when the month passed, and are counted out before).
    await waitFor(
      async () =>
        (await Promise.all((await invoicesOf(0)).map((i) => chargeOf(i?.charge)))).every(
          (c) => c.status === "released",
        ),
      { timeoutMs: 30_000, what: "period 0's charges released" },
    );
    const payoutBefore = await chain.balanceOf(m.payoutAddress);
    await m.advance(3601);
    const releaseHashes = new Set<Hex>();
    for (const c of charged) {
      const [event] = await m.waitForEvents("charge.released", 1, (o) => o.id === c.id);
      if (event === undefined) throw new Error(`no charge.released for ${c.id}`);
      releaseHashes.add((event.data.object.ended_onchain as { transaction_hash: Hex }).transaction_hash);
    }
    let movedToPayout = 0n;
    for (const releaseHash of releaseHashes)
      for (const t of await chain.usdcTransfers(releaseHash))
        if (t.from === chain.escrow.toLowerCase() && t.to === m.payoutAddress.toLowerCase())
          movedToPayout += t.value;
    expect(movedToPayout).toBe(boundarySum);
    expect((await chain.balanceOf(m.payoutAddress)) - payoutBefore).toBe(boundarySum);
  });

  it("bills metered usage with the next invoice, records usage above the cap as over_limit, and is idempotent", async () => {
    const m = await merchant();
    const price = await m.call("/v1/prices", {
      product_name: "API",
      amount_decimal: "2",
      chain: 31337,
      usage: { unit_amount_decimal: "0.5", unit: "call" },
    });
    const sub = (
      await m.call("/v1/subscriptions", { customer: "cus_api", price: price.json.id, cap_decimal: "10" })
    ).json;
    const early = await m.call(`/v1/subscriptions/${sub.id}/usage_records`, { quantity: 1 });
    expect(expectErrorShape(early.json).code).toBe("subscription_not_billing");
    await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "50" });
    await m.call(`/v1/test/mandates/${sub.mandate}/authorize`, {});
    await m.waitForEvents("invoice.paid", 1, (o) => o.subscription === sub.id);

    const record = (quantity: number, idempotencyKey?: string) =>
      api(`/v1/subscriptions/${sub.id}/usage_records`, {
        key: m.key,
        body: { quantity },
        ...(idempotencyKey ? { idempotencyKey } : {}),
      });
    const first = await record(10, "usage-key-1");
    expect(first.json).toMatchObject({ object: "usage_record", quantity: 10, status: "billable", period: 0 });
    const replayed = await record(10, "usage-key-1");
    expect(replayed.json.id).toBe(first.json.id);
    // 2 + (10 + 7) × 0.5 = 10.5 > 10: recorded, not billed.
    const over = await record(7);
    expect(over.json).toMatchObject({ status: "over_limit", quantity: 7 });
    const [exceeded] = await m.waitForEvents("usage.limit_exceeded", 1, (o) => o.subscription === sub.id);
    expect(exceeded?.data.object).toMatchObject({
      id: over.json.id,
      next_charge_decimal: "10.5",
      cap_decimal: "10",
    });
    expect((await record(6)).json.status).toBe("billable");
    const listed = (await m.call(`/v1/subscriptions/${sub.id}/usage_records`)).json.data;
    expect(listed).toHaveLength(3);
    for (const bad of [{ quantity: 0 }, { quantity: 1.5 }, { quantity: "3" }, {}])
      expect((await m.call(`/v1/subscriptions/${sub.id}/usage_records`, bad)).status).toBe(400);

    await m.advance(MONTH);
    const paid = await m.waitForEvents("invoice.paid", 2, (o) => o.subscription === sub.id);
    const second = paid.find((e) => e.data.object.period === 1)?.data.object;
    expect(second).toMatchObject({
      total_decimal: "10",
      lines: [
        { kind: "price", amount_decimal: "2" },
        { kind: "usage", quantity: "16", amount_decimal: "8" },
      ],
    });
    const fixedOnly = await m.call("/v1/prices", { product_name: "Flat", amount_decimal: "1", chain: 31337 });
    const flat = (await m.call("/v1/subscriptions", { customer: "c", price: fixedOnly.json.id })).json;
    await m.call(`/v1/test/mandates/${flat.mandate}/fund`, { amount_decimal: "5" });
    await m.call(`/v1/test/mandates/${flat.mandate}/authorize`, {});
    await waitFor(async () => (await m.call(`/v1/subscriptions/${flat.id}`)).json.status === "active", {
      timeoutMs: 20_000,
      what: "flat subscription active",
    });
    const notMetered = await m.call(`/v1/subscriptions/${flat.id}/usage_records`, { quantity: 1 });
    expect(expectErrorShape(notMetered.json).code).toBe("subscription_not_metered");
  });
});
