/**
 * A subscription's invoice whose charge is returned during its hold, tried as a merchant would: the
 * first invoice paid by a held charge, then `POST /v1/charges/{id}/return`. The money is back with the
 * customer (read on chain), so the period is unpaid: the invoice shows nothing paid and what went back,
 * `invoice.payment_failed` (failure_code `charge_returned`) follows `invoice.paid`, and the subscription
 * is `past_due` (docs/subscriptions.md, "A charge returned during its hold").
 */
import type { Hex } from "viem";
import { describe, expect, it } from "vitest";
import { chainDriver, usd } from "./chain-driver.ts";
import { merchantOnTestChain } from "./helpers.ts";
import { workerPassed } from "./settle.ts";

describe("a subscription's charge returned during its hold", () => {
  it("leaves its invoice unpaid, with what went back, and the subscription past_due", async () => {
    const chain = chainDriver(31337);
    const m = await merchantOnTestChain();
    const price = await m.call("/v1/prices", { product_name: "Returned", amount_decimal: "7", chain: 31337 });
    expect(price.status, price.text).toBe(200);
    const created = await m.call("/v1/subscriptions", { customer: "cus_returned", price: price.json.id });
    expect(created.status, created.text).toBe(200);
    const sub = created.json.id as string;
    const mandateId = created.json.mandate as string;
    expect((await m.call(`/v1/test/mandates/${mandateId}/fund`, { amount_decimal: "20" })).status).toBe(200);
    expect((await m.call(`/v1/test/mandates/${mandateId}/authorize`, {})).status).toBe(200);
    const [paid] = await m.waitForEvents("invoice.paid", 1, (o) => o.subscription === sub);
    const invoice = paid?.data.object.id as string;
    const charge = paid?.data.object.charge as string;
    const held = (await m.call(`/v1/charges/${charge}`)).json;
    expect(held.status, "the test chain holds charges").toBe("succeeded");
    expect(held.release_at).toBeGreaterThan(0);
    const customer = (await m.call(`/v1/mandates/${mandateId}`)).json.customer_address as Hex;
    const before = await chain.balanceOf(customer);

    const returned = await m.call(`/v1/charges/${charge}/return`, {});
    expect(returned.status, returned.text).toBe(200);
    await m.waitForEvents("charge.returned", 1, (o) => o.id === charge);
    expect(await chain.balanceOf(customer)).toBe(before + usd("7"));

    const [failed] = await m.waitForEvents("invoice.payment_failed", 1, (o) => o.id === invoice);
    expect(failed?.data.object).toMatchObject({
      status: "open",
      amount_paid_decimal: "0",
      amount_remaining_decimal: "7",
      amount_returned_decimal: "7",
      failure_code: "charge_returned",
      next_payment_attempt: null,
      paid_at: null,
      charge,
    });
    const now = (await m.call(`/v1/invoices/${invoice}`)).json;
    expect(now).toMatchObject({
      status: "open",
      amount_returned_decimal: "7",
      failure_code: "charge_returned",
    });
    expect(now.returned_at).toBeGreaterThan(0);
    expect((await m.call(`/v1/subscriptions/${sub}`)).json.status).toBe("past_due");
    // Once: a whole billing pass after the event raises no other.
    await workerPassed("subscription-billing");
    const failures = await m.events("invoice.payment_failed");
    expect(failures.filter((e) => e.data.object.id === invoice)).toHaveLength(1);
  });
});
