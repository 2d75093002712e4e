/**
 * Trials end to end on the real stack: the customer signs up front, the mandate is anchored at the
 * trial's end so its periods are the subscription's, nothing is charged during the trial,
 * `subscription.trial_will_end` comes three days before it ends, and the first period is charged at its
 * end; a trial canceled (now, or at its end) charges nothing.
 */
import { describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import { expectErrorShape, merchantOnTestChain, query } from "./helpers.ts";

const DAY = 86_400;

type Merchant = Awaited<ReturnType<typeof merchantOnTestChain>>;

const chargesOf = async (mandate: string) =>
  Number(
    (
      await query<{ n: string }>(
        "SELECT count(*)::text AS n FROM billing.charges WHERE mandate_id = $1 AND status <> 'failed'",
        [mandate],
      )
    )[0]?.n,
  );
const invoicesOf = async (subscription: string) =>
  Number(
    (
      await query<{ n: string }>(
        "SELECT count(*)::text AS n FROM billing.invoices WHERE subscription_id = $1",
        [subscription],
      )
    )[0]?.n,
  );

const trialing = async (m: Merchant, price: string, days: number) => {
  const created = await m.call("/v1/subscriptions", {
    customer: "cus_trial",
    price,
    trial_period_days: days,
  });
  expect(created.status, created.text).toBe(200);
  const sub = created.json;
  await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "100" });
  expect((await m.call(`/v1/test/mandates/${sub.mandate}/authorize`, {})).status).toBe(200);
  await waitFor(async () => (await m.call(`/v1/subscriptions/${sub.id}`)).json.status === "trialing", {
    timeoutMs: 20_000,
    what: "trialing",
  });
  return sub;
};

describe("trials", () => {
  it("signs up front, charges nothing during the trial, warns three days before its end, then bills from its end", async () => {
    const m = await merchantOnTestChain();
    const price = (await m.call("/v1/prices", { product_name: "Pro", amount_decimal: "10", chain: 31337 }))
      .json;
    const now = (await m.advance(1)).json.now as number;
    const sub = await trialing(m, price.id, 14);
    expect(sub).toMatchObject({ status: "incomplete", current_period: null });
    expect(sub.trial_end - sub.trial_start).toBe(14 * DAY);
    expect(sub.trial_start).toBeGreaterThanOrEqual(now);
    // The mandate's periods start at the trial's end: its billing day is the trial's end.
    expect((await m.call(`/v1/mandates/${sub.mandate}`)).json.anchor).toBe(sub.trial_end);
    const during = (await m.call(`/v1/subscriptions/${sub.id}`)).json;
    expect(during).toMatchObject({
      status: "trialing",
      next_billing_at: sub.trial_end,
      latest_invoice: null,
    });
    expect(await invoicesOf(sub.id)).toBe(0);
    expect(await m.events("subscription.trial_will_end")).toEqual([]);

    const at = (await m.advance(1)).json.now as number;
    await m.advance(sub.trial_end - 3 * DAY - at + 60);
    const [notice] = await m.waitForEvents("subscription.trial_will_end", 1, (o) => o.id === sub.id);
    expect(notice?.data.object).toMatchObject({ status: "trialing", trial_end: sub.trial_end });
    expect(await chargesOf(sub.mandate)).toBe(0);

    await m.advance(3 * DAY);
    const [paid] = await m.waitForEvents("invoice.paid", 1, (o) => o.subscription === sub.id);
    expect(paid?.data.object).toMatchObject({ period: 0, period_start: sub.trial_end, total_decimal: "10" });
    const active = (await m.call(`/v1/subscriptions/${sub.id}`)).json;
    expect(active).toMatchObject({ status: "active", current_period: { index: 0, start: sub.trial_end } });
    expect(await chargesOf(sub.mandate)).toBe(1);
    expect(await m.events("subscription.trial_will_end")).toHaveLength(1);
  });

  it("charges nothing for a trial canceled now or at its end", async () => {
    const m = await merchantOnTestChain();
    const price = (await m.call("/v1/prices", { product_name: "Pro", amount_decimal: "10", chain: 31337 }))
      .json;
    const now = await trialing(m, price.id, 7);
    const atEnd = await trialing(m, price.id, 7);
    const canceled = await m.call(`/v1/subscriptions/${now.id}/cancel`, {});
    expect(canceled.json).toMatchObject({ status: "canceled", cancellation_reason: "requested" });
    const canceling = await m.call(`/v1/subscriptions/${atEnd.id}/cancel`, { at_period_end: true });
    expect(canceling.json).toMatchObject({ status: "trialing", cancel_at_period_end: true });

    await m.advance(8 * DAY);
    const [ended] = await m.waitForEvents("subscription.canceled", 1, (o) => o.id === atEnd.id);
    expect(ended?.data.object).toMatchObject({ status: "canceled", cancellation_reason: "requested" });
    for (const sub of [now, atEnd]) {
      expect(await invoicesOf(sub.id)).toBe(0);
      expect(await chargesOf(sub.mandate)).toBe(0);
    }
  });

  it("refuses a trial given twice or ending in the past, creating nothing", async () => {
    const m = await merchantOnTestChain();
    const price = (await m.call("/v1/prices", { product_name: "Pro", amount_decimal: "10", chain: 31337 }))
      .json;
    const now = (await m.advance(1)).json.now as number;
    for (const body of [
      { trial_period_days: 3, trial_end: now + 10 * DAY },
      { trial_end: now - DAY },
      { trial_period_days: 0 },
      { trial_period_days: 731 },
    ]) {
      const refused = await m.call("/v1/subscriptions", { customer: "cus_bad", price: price.id, ...body });
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(expectErrorShape(refused.json).param, JSON.stringify(body)).toMatch(/^trial_/);
    }
    expect((await m.call("/v1/subscriptions?customer=cus_bad")).json.data).toEqual([]);
  });
});
