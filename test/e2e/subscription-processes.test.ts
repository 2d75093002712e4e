/**
 * Two service processes billing the same database at once (the stack's and a second `service/main.ts`):
 * every subscription is invoiced exactly once per period and its mandate charged exactly once per
 * period, and the invoices' sums equal what the chain charged.
 */
import { describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import { api, newAddress, newMerchantWithKey, query } from "./helpers.ts";
import { startSecondService } from "./second-service.ts";
import { relaySettled, workerPassed } from "./settle.ts";

const MONTH = 31 * 86_400;
const SUBSCRIPTIONS = 8;

describe("billing with two processes", () => {
  it("invoices and charges each subscription once per period", async () => {
    await startSecondService();

    const { key } = await newMerchantWithKey("test");
    const call = (path: string, body?: unknown) => api(path, body === undefined ? { key } : { key, body });
    await call("/v1/merchant/chains", { chain: 31337, payout_address: newAddress() });
    const price = await call("/v1/prices", { product_name: "Seat", amount_decimal: "3.5", chain: 31337 });
    const ids: string[] = [];
    for (let i = 0; i < SUBSCRIPTIONS; i++) {
      const sub = await call("/v1/subscriptions", { customer: `cus_${i}`, price: price.json.id });
      expect(sub.status, sub.text).toBe(200);
      ids.push(sub.json.id);
      await call(`/v1/test/mandates/${sub.json.mandate}/fund`, { amount_decimal: "100" });
      await call(`/v1/test/mandates/${sub.json.mandate}/authorize`, {});
    }
    const paid = async () =>
      Number(
        (
          await query<{ n: string }>(
            "SELECT count(*)::text AS n FROM billing.invoices WHERE subscription_id = ANY($1) AND status = 'paid'",
            [ids],
          )
        )[0]?.n,
      );
    for (const [month, expected] of [
      [0, SUBSCRIPTIONS],
      [1, 2 * SUBSCRIPTIONS],
      [2, 3 * SUBSCRIPTIONS],
    ] as const) {
      if (month > 0) await call("/v1/test/clock/advance", { seconds: MONTH });
      await waitFor(async () => (await paid()) === expected, {
        timeoutMs: 60_000,
        what: `${expected} paid invoices`,
      });
    }

    // Counted once the stack's billing worker made a whole pass since, and the relay read past a later fact.
    await workerPassed("subscription-billing");
    await relaySettled(31337);
    const invoices = await query<{ subscription_id: string; period: number; n: string }>(
      `SELECT subscription_id, period, count(*)::text AS n FROM billing.invoices
       WHERE subscription_id = ANY($1) GROUP BY 1, 2`,
      [ids],
    );
    expect(invoices).toHaveLength(3 * SUBSCRIPTIONS);
    expect(invoices.every((row) => row.n === "1")).toBe(true);
    const charges = await query<{ mandate_id: string; period: number; n: string }>(
      `SELECT c.mandate_id, c.period, count(*)::text AS n FROM billing.charges c
       JOIN billing.subscriptions s ON s.mandate_id = c.mandate_id
       WHERE s.id = ANY($1) GROUP BY 1, 2`,
      [ids],
    );
    expect(charges).toHaveLength(3 * SUBSCRIPTIONS);
    expect(charges.every((row) => row.n === "1")).toBe(true);
    // What the invoices say was paid is what the chain charged.
    const [sums] = await query<{ invoiced: string; charged: string }>(
      `SELECT (SELECT sum(total)::text FROM billing.invoices WHERE subscription_id = ANY($1) AND status = 'paid') AS invoiced,
              (SELECT sum(c.amount)::text FROM billing.charges c JOIN billing.subscriptions s ON s.mandate_id = c.mandate_id
               WHERE s.id = ANY($1) AND c.status <> 'failed' AND c.tx_hash IS NOT NULL) AS charged`,
      [ids],
    );
    expect(sums?.invoiced).toBe(String(3 * SUBSCRIPTIONS * 3_500_000));
    expect(sums?.charged).toBe(sums?.invoiced);
    const events = await query<{ n: string }>(
      `SELECT count(*)::text AS n FROM billing.events WHERE type = 'invoice.paid'
       AND payload->'data'->'object'->>'subscription' = ANY($1)`,
      [ids],
    );
    expect(events[0]?.n).toBe(String(3 * SUBSCRIPTIONS));
  });
});
