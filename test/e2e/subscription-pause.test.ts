/**
 * Paused collection end to end on the real stack: while paused each period's invoice is written void
 * (or uncollectible) and nothing is charged; resuming (by request, or at `resumes_at`) charges the next
 * period; dunning does not run on a paused subscription, and its unpaid invoice lapses without ending it.
 */
import { describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import { expectErrorShape, merchantOnTestChain, query } from "./helpers.ts";

const DAY = 86_400;

type Merchant = Awaited<ReturnType<typeof merchantOnTestChain>>;

const chargesOf = async (mandate: string, period: number) =>
  Number(
    (
      await query<{ n: string }>(
        "SELECT count(*)::text AS n FROM billing.charges WHERE mandate_id = $1 AND period = $2 AND status <> 'failed'",
        [mandate, period],
      )
    )[0]?.n,
  );

/** Waits for the subscription's invoice of `period` (whatever its status) and returns it. */
const invoiceOf = async (m: Merchant, subscription: string, period: number) => {
  let found: Record<string, unknown> | undefined;
  await waitFor(
    async () => {
      const invoices = (await m.call(`/v1/invoices?subscription=${subscription}&limit=100`)).json
        .data as Array<Record<string, unknown>>;
      found = invoices.find((i) => i.period === period);
      return found !== undefined;
    },
    { timeoutMs: 30_000, what: `invoice of period ${period}` },
  );
  return found as Record<string, unknown>;
};

const signed = async (m: Merchant, fund: string) => {
  const price = (await m.call("/v1/prices", { product_name: "Pro", amount_decimal: "10", chain: 31337 }))
    .json;
  const sub = (await m.call("/v1/subscriptions", { customer: "cus_pause", price: price.id })).json;
  await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: fund });
  expect((await m.call(`/v1/test/mandates/${sub.mandate}/authorize`, {})).status).toBe(200);
  await m.waitForEvents("invoice.paid", 1, (o) => o.subscription === sub.id);
  return (await m.call(`/v1/subscriptions/${sub.id}`)).json;
};

describe("pause collection", () => {
  it("writes void invoices while paused, charges nothing, and charges again once resumed", async () => {
    const m = await merchantOnTestChain();
    const sub = await signed(m, "100");
    const paused = await m.call(`/v1/subscriptions/${sub.id}`, { pause_collection: { behavior: "void" } });
    expect(paused.status, paused.text).toBe(200);
    expect(paused.json.pause_collection).toEqual({ behavior: "void", resumes_at: null });
    await m.waitForEvents("subscription.paused", 1, (o) => o.id === sub.id);

    const now = (await m.advance(1)).json.now as number;
    await m.advance(sub.current_period.end - now + 60);
    expect(await invoiceOf(m, sub.id, 1)).toMatchObject({
      status: "void",
      total_decimal: "10",
      charge: null,
    });
    expect(await chargesOf(sub.mandate, 1)).toBe(0);

    const resumed = await m.call(`/v1/subscriptions/${sub.id}`, { pause_collection: null });
    expect(resumed.json.pause_collection).toBeNull();
    await m.waitForEvents("subscription.resumed", 1, (o) => o.id === sub.id);
    const current = resumed.json.current_period;
    await m.advance(current.end - current.start);
    const [paid] = await m.waitForEvents(
      "invoice.paid",
      1,
      (o) => o.subscription === sub.id && o.period === 2,
    );
    expect(paid?.data.object).toMatchObject({ total_decimal: "10" });
    expect(await chargesOf(sub.mandate, 2)).toBe(1);
  });

  it("marks invoices uncollectible while paused and resumes by itself at resumes_at", async () => {
    const m = await merchantOnTestChain();
    const sub = await signed(m, "100");
    const resumesAt = sub.current_period.end + 10 * DAY;
    const bad = await m.call(`/v1/subscriptions/${sub.id}`, {
      pause_collection: { behavior: "keep_as_draft" },
    });
    expect(expectErrorShape(bad.json).param).toBe("pause_collection.behavior");
    const past = await m.call(`/v1/subscriptions/${sub.id}`, {
      pause_collection: { behavior: "void", resumes_at: sub.current_period.start },
    });
    expect(expectErrorShape(past.json).param).toBe("pause_collection.resumes_at");
    expect((await m.call(`/v1/subscriptions/${sub.id}`)).json.pause_collection).toBeNull();

    const paused = await m.call(`/v1/subscriptions/${sub.id}`, {
      pause_collection: { behavior: "mark_uncollectible", resumes_at: resumesAt },
    });
    expect(paused.json.pause_collection).toEqual({ behavior: "mark_uncollectible", resumes_at: resumesAt });
    const now = (await m.advance(1)).json.now as number;
    await m.advance(sub.current_period.end - now + 60);
    expect(await invoiceOf(m, sub.id, 1)).toMatchObject({ status: "uncollectible", charge: null });
    await m.advance(10 * DAY);
    const [resumed] = await m.waitForEvents("subscription.resumed", 1, (o) => o.id === sub.id);
    expect(resumed?.data.object).toMatchObject({ pause_collection: null, status: "active" });
    const current = (await m.call(`/v1/subscriptions/${sub.id}`)).json.current_period;
    await m.advance(current.end - ((await m.advance(1)).json.now as number) + 60);
    await m.waitForEvents("invoice.paid", 1, (o) => o.subscription === sub.id && o.period === 2);
    expect(await chargesOf(sub.mandate, 1)).toBe(0);
    expect(await chargesOf(sub.mandate, 2)).toBe(1);
  });

  it("runs no dunning on a paused subscription: its unpaid invoice lapses and the subscription stays", async () => {
    const m = await merchantOnTestChain();
    const sub = await signed(m, "15");
    const now = (await m.advance(1)).json.now as number;
    await m.advance(sub.current_period.end - now + 60);
    const [failed] = await m.waitForEvents("invoice.payment_failed", 1, (o) => o.subscription === sub.id);
    expect(failed?.data.object).toMatchObject({ period: 1, attempt_count: 1 });
    await m.call(`/v1/subscriptions/${sub.id}`, { pause_collection: { behavior: "void" } });
    // Topped up: a retry would now succeed, if one ran.
    await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "50" });
    const period = (await m.call(`/v1/subscriptions/${sub.id}`)).json.current_period;
    await m.advance(period.end - ((await m.advance(1)).json.now as number) + 60);
    // Period 2's (void) invoice is the marker that the round passed the period's end: the lapse step
    // runs before the boundaries in each round.
    expect(await invoiceOf(m, sub.id, 2)).toMatchObject({ status: "void" });
    expect(await invoiceOf(m, sub.id, 1)).toMatchObject({ status: "uncollectible", attempt_count: 1 });
    expect(await chargesOf(sub.mandate, 1)).toBe(0);
    expect((await m.call(`/v1/subscriptions/${sub.id}`)).json).toMatchObject({
      status: "past_due",
      pause_collection: { behavior: "void" },
    });
  });
});
