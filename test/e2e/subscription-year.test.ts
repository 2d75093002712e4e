/**
 * A year of subscription billing on the real stack, driven by the test clock: twelve paid invoices
 * through an approval that runs out (and is signed again), metered usage over the limit, a charge that
 * fails for funds and is recovered, and a cancellation at period end; beside it, a subscription whose
 * discount ends above its cap. Every advance warning is checked exactly, as is a boundary's batch charge.
 */
import { type Hex, toFunctionSelector } from "viem";
import { describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver } from "./chain-driver.ts";
import { type EventOf, merchantOnTestChain, query } from "./helpers.ts";
import { checkPeriodClose } from "./period-close.ts";
import { relaySettled } from "./settle.ts";

const DAY = 86_400;

type Merchant = Awaited<ReturnType<typeof merchantOnTestChain>>;

/** Moves the chain's clock to `at` (chain time), never backwards. */
const clockOf = async (m: Merchant) => {
  let now = (await m.advance(1)).json.now as number;
  return {
    now: () => now,
    to: async (at: number) => {
      if (at > now) now = (await m.advance(at - now)).json.now as number;
    },
    by: async (seconds: number) => {
      now = (await m.advance(seconds)).json.now as number;
    },
  };
};

const subscriptionOf = async (m: Merchant, id: string) => (await m.call(`/v1/subscriptions/${id}`)).json;

/** Waits until billing has checked the subscription's advance warnings for its coming period. */
const warningsChecked = (id: string) =>
  waitFor(
    async () =>
      (
        await query<{ pending: boolean }>(
          `SELECT (at_risk_check_at IS NOT NULL OR discount_warning_at IS NOT NULL) AS pending
           FROM billing.subscriptions WHERE id = $1`,
          [id],
        )
      )[0]?.pending === false,
    { timeoutMs: 30_000, what: `warnings of ${id} checked` },
  );

const invoiceOf = async (subscription: string, period: number) =>
  (
    await query<{ status: string; total: string; attempt_count: number }>(
      "SELECT status, total::text AS total, attempt_count FROM billing.invoices WHERE subscription_id = $1 AND period = $2",
      [subscription, period],
    )
  )[0];

const waitInvoice = (subscription: string, period: number, status: string) =>
  waitFor(async () => (await invoiceOf(subscription, period))?.status === status, {
    timeoutMs: 30_000,
    what: `invoice ${period} of ${subscription} ${status}`,
  });

const atRisk = (events: EventOf[], subscription: string) =>
  events
    .filter((e) => e.data.object.subscription === subscription)
    .map((e) => [e.data.object.period, e.data.object.reason])
    .sort((a, b) => Number(a[0]) - Number(b[0]));

describe("a year of billing", () => {
  it("bills twelve months through a spent approval, usage over the limit, a failed charge and a discount ending above the cap", async () => {
    const m = await merchantOnTestChain();
    const pro = await m.call("/v1/prices", {
      product_name: "Pro",
      amount_decimal: "10",
      usage: { unit_amount_decimal: "1", unit: "call" },
    });
    const intro = await m.call("/v1/prices", { product_name: "Intro", amount_decimal: "10" });
    const half = await m.call("/v1/coupons", { percent_off: 50, duration_in_months: 2 });
    // A: cap 15 a month, one signature covers 4 × 15 = 60.
    const a = (
      await m.call("/v1/subscriptions", {
        customer: "cus_a",
        price: pro.json.id,
        cap_decimal: "15",
        approval_periods: 4,
      })
    ).json;
    // B: the customer signed for the discounted 5 only; the discount ends after two months.
    const b = await m.call("/v1/subscriptions", {
      customer: "cus_b",
      price: intro.json.id,
      coupon: half.json.id,
      cap_decimal: "5",
    });
    expect(b.status, b.text).toBe(200);
    expect(b.json.cap_decimal).toBe("5");
    for (const sub of [a, b.json]) {
      await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "100" });
      expect((await m.call(`/v1/test/mandates/${sub.mandate}/authorize`, {})).status).toBe(200);
      await waitInvoice(sub.id, 0, "paid");
    }
    const clock = await clockOf(m);

    for (let period = 1; period <= 12; period++) {
      const nextAt = (await subscriptionOf(m, a.id)).next_billing_at as number;
      // Inside the warning window: three days before the charge.
      await clock.to(nextAt - 2 * DAY);
      await warningsChecked(a.id);
      if (period <= 2) await warningsChecked(b.json.id);
      if (period === 4) {
        const billable = await m.call(`/v1/subscriptions/${a.id}/usage_records`, { quantity: 3 });
        expect(billable.json.status).toBe("billable");
      }
      if (period === 7) {
        // 10 + 10 calls would be 20, above the cap of 15: recorded, not charged.
        const over = await m.call(`/v1/subscriptions/${a.id}/usage_records`, { quantity: 10 });
        expect(over.json.status).toBe("over_limit");
      }
      if (period === 11) {
        // Warned that the approval cannot cover the charge, the customer signs again in time.
        expect((await m.call(`/v1/test/mandates/${a.mandate}/authorize`, {})).status).toBe(200);
      }
      if (period === 12)
        expect((await m.call(`/v1/subscriptions/${a.id}/cancel`, { at_period_end: true })).status).toBe(200);

      await clock.to(nextAt + 60);
      if (period === 12) break;
      if (period === 5 || period === 9) {
        await waitFor(async () => (await invoiceOf(a.id, period))?.attempt_count === 1, {
          timeoutMs: 30_000,
          what: `first attempt of period ${period}`,
        });
        const invoice = await invoiceOf(a.id, period);
        expect(invoice?.status).toBe("open");
        expect((await subscriptionOf(m, a.id)).status).toBe("past_due");
        if (period === 5) await m.call(`/v1/test/mandates/${a.mandate}/authorize`, {});
        else await m.call(`/v1/test/mandates/${a.mandate}/fund`, { amount_decimal: "50" });
        await clock.by(DAY + 60);
      }
      await waitInvoice(a.id, period, "paid");
      if (period === 2) await waitInvoice(b.json.id, 2, "uncollectible");
    }

    const [ended] = await m.waitForEvents("subscription.canceled", 1, (o) => o.id === a.id);
    expect(ended?.data.object).toMatchObject({ status: "canceled", cancellation_reason: "requested" });
    const invoices = await query<{ period: number; status: string; total: string }>(
      "SELECT period, status, total::text AS total FROM billing.invoices WHERE subscription_id = $1 ORDER BY period",
      [a.id],
    );
    expect(invoices.map((i) => i.period)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    expect(invoices.every((i) => i.status === "paid")).toBe(true);
    expect(invoices.map((i) => i.total)).toEqual([
      "10000000",
      "10000000",
      "10000000",
      "10000000",
      "13000000", // 3 calls billed with period 4
      "10000000",
      "10000000",
      "10000000", // the over-limit calls were not billed
      "10000000",
      "10000000",
      "10000000",
      "10000000",
    ]);
    const [charged] = await query<{ sum: string; n: string }>(
      `SELECT sum(amount)::text AS sum, count(*)::text AS n FROM billing.charges
       WHERE mandate_id = $1 AND status IN ('succeeded', 'released')`,
      [a.mandate],
    );
    expect(charged).toEqual({ sum: "123000000", n: "12" });

    const warnings = await m.events("schedule.upcoming_charge_at_risk");
    expect(atRisk(warnings, a.id)).toEqual([
      [5, "approval_exhausted"],
      [9, "insufficient_funds"],
      [11, "approval_exhausted"],
    ]);
    expect(atRisk(warnings, b.json.id)).toEqual([[2, "mandate_cap_exceeded"]]);
    const approval = warnings.find((e) => e.data.object.period === 5);
    expect(approval?.data.object).toMatchObject({
      object: "upcoming_charge",
      subscription: a.id,
      mandate: a.mandate,
      amount_decimal: "10",
      cap_decimal: "15",
      approval_left_decimal: "7",
      token: "USDC",
      chain: 31337,
    });
    expect(approval?.data.object.authorization_url).toBe(a.authorization_url);

    const ending = await m.events("discount.ending_above_cap");
    expect(ending).toHaveLength(1);
    expect(ending[0]?.data.object).toMatchObject({
      object: "upcoming_charge",
      subscription: b.json.id,
      period: 2,
      amount_decimal: "10",
      cap_decimal: "5",
      reason: "mandate_cap_exceeded",
    });
    expect(ending[0]?.data.object.discount_ends_at).toBe(ending[0]?.data.object.charge_at);
    const bEnded = (await subscriptionOf(m, b.json.id)) as { status: string; cancellation_reason: string };
    expect(bEnded).toMatchObject({ status: "canceled", cancellation_reason: "payment_failed" });

    expect(await m.events("usage.limit_exceeded")).toHaveLength(1);
    const failures = (await m.events("invoice.payment_failed")).map((e) => [
      e.data.object.subscription,
      e.data.object.period,
    ]);
    expect(failures.sort()).toEqual(
      [
        [a.id, 5],
        [a.id, 9],
        [b.json.id, 2],
      ].sort(),
    );
    expect(await m.events("mandate.requires_authorization")).toHaveLength(1);
    expect(await m.events("mandate.insufficient")).toHaveLength(1);

    // The year closed month by month, in two time zones, tied to the token's Transfer logs.
    await waitFor(
      async () =>
        (
          await query(
            "SELECT 1 FROM billing.charges WHERE merchant_id = $1 AND status = 'succeeded' AND release_at IS NOT NULL",
            [m.merchantId],
          )
        ).length === 0,
      { timeoutMs: 60_000, what: "every hold of the year released" },
    );
    await relaySettled(31337);
    const customers = await Promise.all(
      [a.mandate, b.json.mandate].map(
        async (id: string) => (await m.call(`/v1/mandates/${id}`)).json.customer_address as Hex,
      ),
    );
    const [counted] = await query<{ paid: number; uncollectible: number }>(
      `SELECT (count(*) FILTER (WHERE status = 'paid'))::int AS paid,
         (count(*) FILTER (WHERE status = 'uncollectible'))::int AS uncollectible
       FROM billing.invoices WHERE merchant_id = $1`,
      [m.merchantId],
    );
    for (const zone of ["UTC", "America/New_York"]) {
      const reports = await checkPeriodClose(m, chainDriver(31337), zone, customers);
      expect(reports.length, zone).toBeGreaterThanOrEqual(12);
      const total = (status: "paid" | "uncollectible") =>
        reports.reduce((n, r) => n + r.invoices.reduce((k, i) => k + i[status].count, 0), 0);
      expect(total("paid"), zone).toBe(counted?.paid);
      expect(total("uncollectible"), zone).toBe(counted?.uncollectible);
    }
  });

  it("charges a boundary's invoices in one batch transaction, and fails alone the one the customer cannot pay", async () => {
    const m = await merchantOnTestChain();
    const price = await m.call("/v1/prices", { product_name: "Seat", amount_decimal: "4" });
    const subs: Array<{ id: string; mandate: string }> = [];
    for (let i = 0; i < 4; i++) {
      const sub = (await m.call("/v1/subscriptions", { customer: `cus_${i}`, price: price.json.id })).json;
      // The last customer can pay the first month only.
      await m.call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: i === 3 ? "4" : "40" });
      await m.call(`/v1/test/mandates/${sub.mandate}/authorize`, {});
      subs.push(sub);
    }
    for (const sub of subs) await waitInvoice(sub.id, 0, "paid");
    const clock = await clockOf(m);
    const last = Math.max(
      ...(await Promise.all(
        subs.map(async (s) => (await subscriptionOf(m, s.id)).next_billing_at as number),
      )),
    );
    await clock.to(last + 60);
    for (const sub of subs.slice(0, 3)) await waitInvoice(sub.id, 1, "paid");
    const poor = subs[3] as { id: string; mandate: string };
    await waitFor(async () => (await invoiceOf(poor.id, 1))?.attempt_count === 1, {
      timeoutMs: 30_000,
      what: "the poor customer's attempt",
    });

    const charges = await query<{
      mandate_id: string;
      status: string;
      failure_code: string | null;
      purpose: string | null;
    }>(
      `SELECT mandate_id, status, failure_code, relayer_purpose AS purpose FROM billing.charges
       WHERE mandate_id = ANY($1) AND period = 1`,
      [subs.map((s) => s.mandate)],
    );
    const paid = charges.filter((c) => c.status === "succeeded" || c.status === "released");
    expect(paid).toHaveLength(3);
    expect(new Set(paid.map((c) => c.purpose)).size).toBe(1);
    expect(paid[0]?.purpose).toMatch(/^charges:31337:/);
    const [tx] = await query<{ data: string }>(
      "SELECT data FROM billing.relayer_transactions WHERE purpose = $1",
      [paid[0]?.purpose],
    );
    expect(tx?.data.slice(0, 10)).toBe(toFunctionSelector("function chargeMany(bytes32[], uint256[])"));
    expect(charges.find((c) => c.mandate_id === poor.mandate)).toMatchObject({
      status: "failed",
      failure_code: "insufficient_funds",
    });
  });
});
