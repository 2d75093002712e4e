/**
 * Plan changes end to end on the real stack (USDC on the local chain, the billing worker, the test
 * clock): an upgrade within the cap prorated on the next invoice and charged once; a downgrade whose
 * credit carries over invoices; an upgrade above the cap kept as a pending update with its warning,
 * billed at the old price at the boundary, then expired; the refusals. The pending update applied after
 * the customer signs a higher cap, and a price in another token refused, are tested in
 * test/domain/plan-changes.test.ts (a re-signature with a higher cap is part A's escrow path; the e2e
 * stack has one chain and one token).
 */
import { describe, expect, it } from "vitest";
import { api, expectErrorShape, merchantOnTestChain, query } from "./helpers.ts";

const DAY = 86_400;
const USDC = 1_000_000n;

type Merchant = Awaited<ReturnType<typeof merchantOnTestChain>>;

interface Line {
  kind: string;
  description: string;
  amount_decimal: string;
}

const units = (decimal: string) => {
  const negative = decimal.startsWith("-");
  const [whole = "0", fraction = ""] = decimal.replace("-", "").split(".");
  const value = BigInt(whole) * USDC + BigInt(fraction.padEnd(6, "0"));
  return negative ? -value : value;
};

/** A signed, funded subscription to a new price of `amount`, with its first period paid. */
const signedSubscription = async (m: Merchant, amount: string, cap: string) => {
  const price = (
    await m.call("/v1/prices", { product_name: `Plan ${amount}`, amount_decimal: amount, chain: 31337 })
  ).json;
  const sub = (
    await m.call("/v1/subscriptions", { customer: "cus_change", price: price.id, cap_decimal: cap })
  ).json;
  await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "1000" });
  expect((await m.call(`/v1/test/mandates/${sub.mandate}/authorize`, {})).status).toBe(200);
  await m.waitForEvents("invoice.paid", 1, (o) => o.subscription === sub.id);
  return { price, sub: (await m.call(`/v1/subscriptions/${sub.id}`)).json };
};

const newPrice = async (m: Merchant, amount: string) =>
  (await m.call("/v1/prices", { product_name: `Plan ${amount}`, amount_decimal: amount, chain: 31337 })).json;

/** Charges recorded for a mandate's period that did not fail (the escrow takes one per period). */
const chargesOf = async (mandate: string, period: number) =>
  Number(
    (
      await query<{ n: string }>(
        "SELECT count(*)::text AS n FROM billing.charges WHERE mandate_id = $1 AND period = $2 AND status <> 'failed'",
        [mandate, period],
      )
    )[0]?.n,
  );

const invoiceOf = async (m: Merchant, sub: string, period: number) => {
  const paid = await m.waitForEvents("invoice.paid", 1, (o) => o.subscription === sub && o.period === period);
  return paid[0]?.data.object as Record<string, unknown> & { lines: Line[] };
};

/**
 * Whether the lines of a change made at some chain time in [from, to] are those of the rounding rule:
 * the new price's remaining time rounded down, the net rounded down, the credit the difference.
 */
const matchesSomeTime = (
  lines: Line[],
  period: { start: number; end: number },
  window: { from: number; to: number },
  oldAmount: bigint,
  newAmount: bigint,
) => {
  const credit = -units(lines.find((l) => l.description.startsWith("Unused time"))?.amount_decimal ?? "0");
  const charge = units(lines.find((l) => l.description.startsWith("Remaining time"))?.amount_decimal ?? "0");
  const length = BigInt(period.end - period.start);
  for (let at = window.from; at <= window.to; at++) {
    const left = BigInt(period.end - at);
    const floor = (a: bigint) => (a >= 0n ? a / length : -((-a + length - 1n) / length));
    const expectedCharge = floor(newAmount * left);
    const expectedNet = floor((newAmount - oldAmount) * left);
    if (charge === expectedCharge && charge - credit === expectedNet) return true;
  }
  return false;
};

describe("plan changes", () => {
  it("upgrades within the cap at once: the next invoice has the prorations and the new price, charged once", async () => {
    const m = await merchantOnTestChain();
    const { sub } = await signedSubscription(m, "10", "40");
    const pro = await newPrice(m, "20");
    const from = (await m.advance(10 * DAY)).json.now as number;
    const changed = await m.call(`/v1/subscriptions/${sub.id}`, { price: pro.id });
    expect(changed.status, changed.text).toBe(200);
    const to = (await m.advance(1)).json.now as number;
    expect(changed.json).toMatchObject({ price: pro.id, pending_update: null, status: "active" });
    const [updated] = await m.waitForEvents("subscription.updated", 1, (o) => o.id === sub.id);
    expect(updated?.data.object.price).toBe(pro.id);

    await m.advance(sub.current_period.end - to + 60);
    const invoice = await invoiceOf(m, sub.id, 1);
    const prorations = invoice.lines.filter((l) => l.kind === "proration");
    expect(invoice.lines[0]).toMatchObject({ kind: "price", description: "Plan 20", amount_decimal: "20" });
    expect(prorations.map((l) => l.description.replace(/ from .*/, ""))).toEqual([
      "Unused time on Plan 10",
      "Remaining time on Plan 20",
    ]);
    expect(matchesSomeTime(prorations, sub.current_period, { from, to }, 10n * USDC, 20n * USDC)).toBe(true);
    const total = 20n * USDC + prorations.reduce((sum, l) => sum + units(l.amount_decimal), 0n);
    expect(units(invoice.total_decimal as string)).toBe(total);
    expect(total).toBeGreaterThan(20n * USDC);
    expect(total).toBeLessThanOrEqual(40n * USDC);
    // One charge per period: the change made none of its own.
    expect(await chargesOf(sub.mandate, 0)).toBe(1);
    expect(await chargesOf(sub.mandate, 1)).toBe(1);
    const after = (await m.call(`/v1/subscriptions/${sub.id}`)).json;
    expect(after).toMatchObject({ price: pro.id, credit_balance_decimal: "0" });
  });

  it("downgrades with the credit carried over the next invoices, never a negative charge", async () => {
    const m = await merchantOnTestChain();
    const { sub } = await signedSubscription(m, "30", "30");
    const basic = await newPrice(m, "5");
    await m.advance(DAY);
    const changed = await m.call(`/v1/subscriptions/${sub.id}`, { price: basic.id });
    expect(changed.status, changed.text).toBe(200);
    const to = (await m.advance(1)).json.now as number;

    await m.advance(sub.current_period.end - to + 60);
    const first = await invoiceOf(m, sub.id, 1);
    const net = first.lines
      .filter((l) => l.kind === "proration")
      .reduce((s, l) => s + units(l.amount_decimal), 0n);
    // About 30 − 5 credited for the 29-odd days left: 5 + net is well below zero.
    expect(net).toBeLessThan(-20n * USDC);
    const carried = -(5n * USDC + net);
    expect(first).toMatchObject({ status: "paid", total_decimal: "0", starting_credit_decimal: "0" });
    expect(units(first.ending_credit_decimal as string)).toBe(carried);
    expect(first.lines.at(-1)).toMatchObject({ kind: "credit" });
    expect(units(first.lines.at(-1)?.amount_decimal ?? "0")).toBe(carried);
    expect(await chargesOf(sub.mandate, 1)).toBe(0);
    const between = (await m.call(`/v1/subscriptions/${sub.id}`)).json;
    expect(units(between.credit_balance_decimal)).toBe(carried);

    // The next invoice takes 5 from the credit: nothing charged again.
    await m.advance(between.current_period.end - between.current_period.start);
    const second = await invoiceOf(m, sub.id, 2);
    expect(second).toMatchObject({ total_decimal: "0" });
    expect(units(second.starting_credit_decimal as string)).toBe(carried);
    expect(units(second.ending_credit_decimal as string)).toBe(carried - 5n * USDC);
    expect(second.lines).toEqual([
      expect.objectContaining({ kind: "price", amount_decimal: "5" }),
      expect.objectContaining({ kind: "credit", amount_decimal: "-5" }),
    ]);
    expect(await chargesOf(sub.mandate, 2)).toBe(0);
  });

  it("keeps an upgrade above the cap as a pending update, warns at once, bills the old price, then expires it", async () => {
    const m = await merchantOnTestChain();
    const { price, sub } = await signedSubscription(m, "10", "15");
    const pro = await newPrice(m, "20");
    await m.advance(5 * DAY);

    const refused = await m.call(`/v1/subscriptions/${sub.id}`, {
      price: pro.id,
      payment_behavior: "error_if_incomplete",
    });
    expect(refused.status).toBe(400);
    expect(expectErrorShape(refused.json)).toMatchObject({ code: "mandate_cap_exceeded", param: "price" });
    expect((await m.call(`/v1/subscriptions/${sub.id}`)).json.pending_update).toBeNull();

    const pending = await m.call(`/v1/subscriptions/${sub.id}`, { price: pro.id });
    expect(pending.status, pending.text).toBe(200);
    expect(pending.json).toMatchObject({ price: price.id, scheduled_change: null });
    expect(pending.json.pending_update).toMatchObject({
      price: pro.id,
      proration_behavior: "create_prorations",
      effective: "now",
    });
    const [warning] = await m.waitForEvents(
      "schedule.upcoming_charge_at_risk",
      1,
      (o) => o.subscription === sub.id,
    );
    expect(warning?.data.object).toMatchObject({
      reason: "mandate_cap_exceeded",
      period: 1,
      cap_decimal: "15",
      amount_decimal: pending.json.pending_update.amount_due_decimal,
      authorization_url: sub.authorization_url,
    });
    expect(units(pending.json.pending_update.amount_due_decimal)).toBeGreaterThan(15n * USDC);
    // The upcoming charge shows the invoice it would be: the new price and the change's prorations.
    expect(((warning?.data.object.lines ?? []) as Line[]).map((l) => l.kind)).toEqual([
      "price",
      "proration",
      "proration",
    ]);

    // The boundary comes first: the old price is billed and the update waits.
    await m.advance(sub.current_period.end - ((await m.advance(1)).json.now as number) + 60);
    const next = await invoiceOf(m, sub.id, 1);
    expect(next).toMatchObject({ total_decimal: "10" });
    expect(next.lines.map((l) => l.kind)).toEqual(["price"]);
    const waiting = (await m.call(`/v1/subscriptions/${sub.id}`)).json;
    expect(waiting.pending_update).toMatchObject({ price: pro.id });

    // The period after: expired before it is billed, still at the old price.
    await m.advance(waiting.current_period.end - waiting.current_period.start);
    const [expired] = await m.waitForEvents("subscription.pending_update_expired", 1, (o) => o.id === sub.id);
    expect(expired?.data.object).toMatchObject({ price: price.id, pending_update: null });
    expect(await invoiceOf(m, sub.id, 2)).toMatchObject({ total_decimal: "10" });
    expect(await chargesOf(sub.mandate, 1)).toBe(1);
    expect(await chargesOf(sub.mandate, 2)).toBe(1);
  });

  it("cancels a pending update, schedules a change for the period's end, and refuses bad changes changing nothing", async () => {
    const m = await merchantOnTestChain();
    const { price, sub } = await signedSubscription(m, "10", "15");
    const pro = await newPrice(m, "20");
    const cheaper = await newPrice(m, "8");
    expect(
      (await m.call(`/v1/subscriptions/${sub.id}`, { price: pro.id })).json.pending_update,
    ).not.toBeNull();
    const dropped = await api(`/v1/subscriptions/${sub.id}/pending_update`, { key: m.key, method: "DELETE" });
    expect(dropped.status, dropped.text).toBe(200);
    expect(dropped.json).toMatchObject({ price: price.id, pending_update: null });
    const again = await api(`/v1/subscriptions/${sub.id}/pending_update`, { key: m.key, method: "DELETE" });
    expect(expectErrorShape(again.json).code).toBe("pending_update_missing");

    const scheduled = await m.call(`/v1/subscriptions/${sub.id}`, {
      price: cheaper.id,
      effective: "period_end",
    });
    expect(scheduled.json).toMatchObject({
      price: price.id,
      scheduled_change: { price: cheaper.id, effective_at: sub.current_period.end },
    });

    const inactive = await newPrice(m, "3");
    await m.call(`/v1/prices/${inactive.id}`, { active: false });
    for (const [body, code, param] of [
      [{ price: inactive.id }, "price_inactive", "price"],
      [{ price: "price_01KJQB2M40S7Y3XW9RKD5T8QEV" }, "resource_missing", "price"],
      [{ coupon: "cpn_01KJQ0QR70E8R9R1564N1R8RS2" }, "resource_missing", "coupon"],
      [{}, "parameter_missing", "price"],
      [{ price: pro.id, proration_behavior: "always" }, "parameter_invalid", "proration_behavior"],
    ] as const) {
      const bad = await m.call(`/v1/subscriptions/${sub.id}`, body);
      expect(bad.status, JSON.stringify(body)).toBe(400);
      expect(expectErrorShape(bad.json), JSON.stringify(body)).toMatchObject({ code, param });
    }
    expect((await m.call(`/v1/subscriptions/${sub.id}`)).json).toMatchObject({
      price: price.id,
      scheduled_change: { price: cheaper.id },
    });

    // At the boundary the scheduled change is made first: period 1 is billed at the new price, no prorations.
    await m.advance(sub.current_period.end - ((await m.advance(1)).json.now as number) + 60);
    const invoice = await invoiceOf(m, sub.id, 1);
    expect(invoice).toMatchObject({ total_decimal: "8" });
    expect(invoice.lines.map((l) => l.kind)).toEqual(["price"]);
    expect((await m.call(`/v1/subscriptions/${sub.id}`)).json).toMatchObject({
      price: cheaper.id,
      scheduled_change: null,
    });
  });
});
