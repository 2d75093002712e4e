/**
 * Gas cost, accounted (issue 45 item 6), on the stack's anvil: test funds, authorisations, a charge and
 * its return, a payment and its sweep, subscriptions billed at a boundary in one `chargeMany`, and the
 * releases of their held charges. The relayer's balance drop over the blocks of the test equals, to the
 * wei, the sum of the shares attributed to merchants' objects; the transactions are found on the chain
 * (every transaction the relayer's account sent in those blocks), not in our own records. A merchant sees
 * only its own costs, and bad filters get 400s.
 */
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver } from "./chain-driver.ts";
import { cli, expectErrorShape, merchantOnTestChain, query, stack } from "./helpers.ts";
import { metricValue } from "./settle.ts";

const DAY = 86_400;
const MONTH = 31 * DAY;

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON bodies
type Json = any;

/** Every page of a merchant's gas costs for `filter`. */
const allCosts = async (call: (path: string) => Promise<{ status: number; json: Json }>, filter = "") => {
  const costs: Json[] = [];
  let after = "";
  for (;;) {
    const page = await call(`/v1/gas_costs?limit=100${filter}${after ? `&starting_after=${after}` : ""}`);
    expect(page.status).toBe(200);
    costs.push(...page.json.data);
    if (!page.json.has_more) return costs;
    after = page.json.data.at(-1).id;
  }
};

describe("gas cost, accounted", () => {
  it("attributes every wei the relayer paid to the objects its transactions carried", async () => {
    const chain = chainDriver(31337);
    const relayer = privateKeyToAccount(stack().relayerKey).address;
    const m = await merchantOnTestChain();
    const before = await chain.client.getBlockNumber();
    const balanceBefore = await chain.client.getBalance({ address: relayer, blockNumber: before });

    // A charge on a mandate of its own, returned while held.
    const opened = await m.call("/v1/mandates", {
      cap_decimal: "5",
      period: "month",
      customer: "cus_gas",
      reference: "gas",
    });
    expect(opened.status, opened.text).toBe(200);
    const mandate = opened.json.id as string;
    expect((await m.call(`/v1/test/mandates/${mandate}/fund`, { amount_decimal: "5" })).status).toBe(200);
    expect((await m.call(`/v1/test/mandates/${mandate}/authorize`, {})).status).toBe(200);
    const charged = await m.call(`/v1/mandates/${mandate}/charges`, { amount_decimal: "2" });
    expect(charged.status, charged.text).toBe(200);
    const charge = charged.json.id as string;
    await m.waitForEvents("charge.succeeded", 1, (o) => o.id === charge);
    const returned = await m.call(`/v1/charges/${charge}/return`, {});
    expect(returned.status, returned.text).toBe(200);
    await m.waitForEvents("charge.returned", 1, (o) => o.id === charge);

    // A payment, paid and swept.
    const payment = await m.call("/v1/payments", { amount_decimal: "3" });
    expect(payment.status, payment.text).toBe(200);
    expect((await m.call(`/v1/test/payments/${payment.json.id}/pay`, { amount_decimal: "3" })).status).toBe(
      200,
    );
    await m.waitForEvents("payment.paid", 1, (o) => o.id === payment.json.id);

    // Three subscriptions: period 0 charged on authorisation, period 1 at the boundary in one batch.
    const price = await m.call("/v1/prices", { product_name: "Gas", amount_decimal: "4", chain: 31337 });
    const subscriptions: string[] = [];
    for (const customer of ["cus_gas_a", "cus_gas_b", "cus_gas_c"]) {
      const sub = await m.call("/v1/subscriptions", { customer, price: price.json.id });
      expect(sub.status, sub.text).toBe(200);
      subscriptions.push(sub.json.id);
      await m.call(`/v1/test/mandates/${sub.json.mandate}/fund`, { amount_decimal: "8" });
      expect((await m.call(`/v1/test/mandates/${sub.json.mandate}/authorize`, {})).status).toBe(200);
    }
    const ours = (o: Record<string, unknown>) => subscriptions.includes(o.subscription as string);
    const firstInvoices = await m.waitForEvents("invoice.paid", 3, ours);
    await m.advance(MONTH + 60);
    const invoices = await m.waitForEvents("invoice.paid", 6, ours);
    // The period 0 charges' holds ended with the month: released.
    const firstCharges = firstInvoices.map((e) => e.data.object.charge as string);
    await m.waitForEvents("charge.released", 3, (o) => firstCharges.includes(o.id as string));
    // And the payment's hold: released once nothing of it is held.
    await waitFor(
      async () => (await m.call(`/v1/payments/${payment.json.id}`)).json.amount_held_decimal === "0",
      {
        timeoutMs: 30_000,
        intervalMs: 200,
        what: "the payment's release",
      },
    );

    // Every transaction the relayer's account sent in these blocks, from the chain itself.
    const after = await chain.client.getBlockNumber();
    const balanceAfter = await chain.client.getBalance({ address: relayer, blockNumber: after });
    const hashes: Hex[] = [];
    for (let n = before + 1n; n <= after; n++) {
      const block = await chain.client.getBlock({ blockNumber: n, includeTransactions: true });
      for (const tx of block.transactions)
        if (tx.from.toLowerCase() === relayer.toLowerCase()) hashes.push(tx.hash);
    }
    expect(hashes.length).toBeGreaterThanOrEqual(10);
    await waitFor(
      async () =>
        (
          await query<{ n: number }>(
            "SELECT count(*)::int AS n FROM billing.gas_costs WHERE transaction_hash = ANY($1)",
            [hashes],
          )
        )[0]?.n === hashes.length,
      {
        timeoutMs: 30_000,
        intervalMs: 200,
        what: `the cost of each of ${hashes.length} relayer transactions`,
      },
    );
    const [sums] = await query<{ attributed: string; unattributed: string | null; total: string }>(
      `SELECT (SELECT sum(s.amount_wei) FROM billing.gas_cost_shares s JOIN billing.gas_costs g
                USING (relayer_transaction_id)
              WHERE g.transaction_hash = ANY($1) AND s.merchant_id IS NOT NULL)::text AS attributed,
        (SELECT sum(s.amount_wei) FROM billing.gas_cost_shares s JOIN billing.gas_costs g
                USING (relayer_transaction_id)
              WHERE g.transaction_hash = ANY($1) AND s.merchant_id IS NULL)::text AS unattributed,
        (SELECT sum(total_wei) FROM billing.gas_costs WHERE transaction_hash = ANY($1))::text AS total`,
      [hashes],
    );
    expect(sums?.unattributed).toBeNull();
    expect(BigInt(sums?.attributed ?? "0")).toBe(balanceBefore - balanceAfter);
    expect(BigInt(sums?.total ?? "0")).toBe(balanceBefore - balanceAfter);

    // The merchant's view: each of its objects, with what was done for it.
    const costs = await allCosts(m.call);
    const kindsOf = (source: string) =>
      costs
        .filter((c) => c.source === source)
        .map((c) => c.kind)
        .sort();
    expect(kindsOf(mandate)).toEqual(["authorization", "test_funding"]);
    expect(kindsOf(charge)).toEqual(["charge", "return"]);
    expect(kindsOf(payment.json.id)).toEqual(["payment_release", "sweep", "test_funding"]);
    for (const id of firstCharges) expect(kindsOf(id)).toEqual(["charge", "release"]);
    const batchCharges = invoices.filter((e) => e.data.object.period === 1).map((e) => e.data.object.charge);
    const batch = costs.filter((c) => batchCharges.includes(c.source));
    expect(batch).toHaveLength(3);
    expect(new Set(batch.map((c) => c.transaction.hash)).size).toBe(1);
    expect(batch[0].transaction.objects).toBeGreaterThanOrEqual(3);
    // A transaction's shares (of every merchant) sum to its cost, which is the receipt's.
    const receipt = await chain.client.getTransactionReceipt({ hash: batch[0].transaction.hash });
    const paid = receipt.gasUsed * receipt.effectiveGasPrice;
    expect(batch[0].transaction).toMatchObject({
      status: "mined",
      block_number: Number(receipt.blockNumber),
      gas_used: String(receipt.gasUsed),
      effective_gas_price: String(receipt.effectiveGasPrice),
      l1_fee_wei: "0",
      total_wei: String(paid),
    });
    const [shared] = await query<{ sum: string }>(
      `SELECT sum(s.amount_wei)::text AS sum FROM billing.gas_cost_shares s JOIN billing.gas_costs g
        USING (relayer_transaction_id) WHERE g.transaction_hash = $1`,
      [batch[0].transaction.hash],
    );
    expect(BigInt(shared?.sum ?? "0")).toBe(paid);
    for (const c of costs)
      expect(c).toMatchObject({ object: "gas_cost", livemode: false, chain: 31337, native_currency: "ETH" });

    // Filters, the monthly totals, the operator's totals and the counter.
    const ofCharge = await allCosts(m.call, `&source=${charge}`);
    expect(ofCharge.map((c) => c.kind).sort()).toEqual(["charge", "return"]);
    expect((await allCosts(m.call, "&kind=sweep")).map((c) => c.source)).toEqual([payment.json.id]);
    expect(await allCosts(m.call, "&chain=1")).toEqual([]);
    const created = costs.map((c) => c.created as number);
    expect(await allCosts(m.call, `&from=${Math.max(...created) + 1}`)).toEqual([]);
    expect(
      await allCosts(m.call, `&from=${Math.min(...created)}&to=${Math.max(...created) + 1}`),
    ).toHaveLength(costs.length);
    const totals = await m.call("/v1/gas_cost_totals?chain=31337");
    expect(totals.status).toBe(200);
    const summed = (totals.json.data as Json[]).reduce((sum, t) => sum + BigInt(t.amount_wei), 0n);
    expect(summed).toBe(costs.reduce((sum, c) => sum + BigInt(c.amount_wei), 0n));
    expect((totals.json.data as Json[]).reduce((n, t) => n + t.count, 0)).toBe(costs.length);
    const operator = await cli("gas", "totals", "--chain", "31337");
    expect(operator.split("\n")[1]).toMatch(/^31337\tETH\t\d+\t\d+\t\d+\t0\t/);
    expect(
      await metricValue('billing_relayer_gas_spent_wei_total{chain_id="31337",native_currency="ETH"}'),
    ).toBeGreaterThan(0);

    // Another merchant sees none of it.
    const stranger = await merchantOnTestChain();
    expect(await allCosts(stranger.call)).toEqual([]);
    expect(await allCosts(stranger.call, `&source=${charge}`)).toEqual([]);
    expect((await stranger.call("/v1/gas_cost_totals")).json.data).toEqual([]);
  });

  it("refuses bad filters with the one error shape", async () => {
    const m = await merchantOnTestChain();
    for (const [path, param] of [
      ["/v1/gas_costs?from=200&to=100", "to"],
      ["/v1/gas_cost_totals?from=200&to=100", "to"],
      ["/v1/gas_costs?kind=fuel", "kind"],
      ["/v1/gas_costs?source=ch_1", "source"],
      ["/v1/gas_costs?chain=-1", "chain"],
      ["/v1/gas_costs?limit=0", "limit"],
      ["/v1/gas_cost_totals?month=2026-11", "month"],
    ] as const) {
      const refused = await m.call(path);
      expect(refused.status, path).toBe(400);
      expect(expectErrorShape(refused.json).param, path).toBe(param);
    }
  });
});
