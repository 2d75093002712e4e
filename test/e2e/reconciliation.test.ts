import type { Hex } from "viem";
import { describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver, DEV_PAYOUT, usd } from "./chain-driver.ts";
import {
  api,
  expectErrorShape,
  merchantOnTestChain,
  newAddress,
  newMerchantWithKey,
  query,
} from "./helpers.ts";
import { relaySettled } from "./settle.ts";

interface Entry {
  type: string;
  block_number: number;
  transaction_hash: string;
  log_index: number;
  charge_id: string;
  amount: string;
  amount_decimal: string;
  cursor: string;
}

const fetchAll = async (query: string, limit: number) => {
  const entries: Entry[] = [];
  let after = "";
  for (;;) {
    const page = await api(
      `/v1/reconciliation?${query}&limit=${limit}${after ? `&starting_after=${after}` : ""}`,
    );
    expect(page.status).toBe(200);
    entries.push(...(page.json.data as Entry[]));
    if (!page.json.has_more) return entries;
    after = (page.json.data as Entry[]).at(-1)?.cursor ?? "";
  }
};

describe("GET /v1/reconciliation", () => {
  it("agrees with the chain's raw logs to the last unit, in JSON and in CSV", async () => {
    const chain = chainDriver(31337);
    const customer = await chain.newCustomer();
    const held = await chain.authorize(customer, { holdSeconds: 300 });
    const direct = await chain.authorize(customer, { salt: 77n });
    await chain.charge(held.mandateId, usd("1.000001"));
    await chain.charge(direct.mandateId, usd("2.5"));
    await chain.returnCharge(held.mandateId, 0);
    await chain.increaseTime(40 * 86_400);
    await chain.mine();
    await chain.charge(held.mandateId, usd("3"));
    await chain.increaseTime(301);
    const release = await chain.release(held.mandateId, 1);
    await waitFor(
      async () =>
        ((await api("/v1/reconciliation?chain=31337&limit=10000")).json.data as Entry[]).some(
          (e) => e.transaction_hash === release.hash,
        ),
      { timeoutMs: 15_000, what: "the release to be indexed" },
    );

    const logs = await chain.client.getContractEvents({
      address: chain.escrow,
      abi: MandateEscrowAbi,
      fromBlock: 0n,
    });
    const payeeOfCharge = new Map<string, string>();
    for (const log of logs)
      if (log.eventName === "Charged")
        payeeOfCharge.set(log.args.chargeId as string, log.args.payee as string);
    const fromChain = logs
      .filter((log) => ["Charged", "Released", "Returned"].includes(log.eventName))
      .filter(
        (log) =>
          payeeOfCharge.get((log.args as { chargeId: string }).chargeId)?.toLowerCase() ===
          DEV_PAYOUT.toLowerCase(),
      )
      .map((log) => ({
        type: { Charged: "charge", Released: "release", Returned: "return" }[log.eventName as "Charged"],
        block_number: Number(log.blockNumber),
        transaction_hash: log.transactionHash,
        log_index: log.logIndex,
        charge_id: (log.args as { chargeId: string }).chargeId.toLowerCase(),
        amount: String((log.args as { amount: bigint }).amount),
      }));

    const reported = (await fetchAll("chain=31337", 3)).map(
      ({ type, block_number, transaction_hash, log_index, charge_id, amount }) => ({
        type,
        block_number,
        transaction_hash,
        log_index,
        charge_id,
        amount,
      }),
    );
    expect(fromChain.length).toBeGreaterThanOrEqual(4);
    expect(reported).toEqual(fromChain);

    const csv = await api("/v1/reconciliation?chain=31337&format=csv");
    expect(csv.headers.get("content-type")).toContain("text/csv");
    expect(csv.headers.get("content-disposition")).toBe('attachment; filename="reconciliation.csv"');
    expect(csv.text.endsWith("\r\n")).toBe(true);
    const lines = csv.text.trimEnd().split("\r\n");
    expect(lines[0]).toBe(
      "type,chain,block_number,block_hash,timestamp,transaction_hash,log_index,mandate,charge_id,period,token,token_address,amount,amount_decimal,customer_address,payee_address,confirmations,livemode,payment_id,deposit_address",
    );
    expect(lines).toHaveLength(fromChain.length + 1);
    expect(lines.some((line) => line.includes(",1000001,1.000001,"))).toBe(true);
    // The same entries as JSON, and no page limit on a download.
    const json = await api("/v1/reconciliation?chain=31337&format=json");
    expect(json.headers.get("content-type")).toContain("application/json");
    expect((json.json as Entry[]).map((e) => e.transaction_hash)).toEqual(
      fromChain.map((e) => e.transaction_hash),
    );
    const limited = await api("/v1/reconciliation?chain=31337&format=csv&limit=10");
    expect(limited.status).toBe(400);
    expect(expectErrorShape(limited.json)).toMatchObject({ param: "limit", code: "parameter_conflict" });
  });

  it("filters by type and block range, shows a merchant only its own, and refuses bad filters", async () => {
    // A release and a charge of this test's own, in blocks of their own.
    const chain = chainDriver(31337);
    const customer = await chain.newCustomer();
    const { mandateId } = await chain.authorize(customer, { holdSeconds: 60, salt: 78n });
    const charged = await chain.charge(mandateId, usd("4"));
    await chain.increaseTime(61);
    const released = await chain.release(mandateId, 0);
    await waitFor(
      async () =>
        (await fetchAll("chain=31337&type=release", 1000)).some((e) => e.transaction_hash === released.hash),
      { timeoutMs: 15_000, what: "the release to be reported" },
    );
    const releases = await fetchAll("chain=31337&type=release", 1000);
    expect(releases.map((e) => e.type)).toEqual(releases.map(() => "release"));
    const ours = releases.find((e) => e.transaction_hash === released.hash);
    if (ours === undefined) throw new Error("the release is not listed");
    const block = Number(released.receipt.blockNumber);
    expect(ours.block_number).toBe(block);
    const one = await fetchAll(`chain=31337&from_block=${block}&to_block=${block}`, 1000);
    expect(one.map((e) => e.transaction_hash)).toContain(released.hash);
    expect(one.map((e) => e.block_number)).toEqual(one.map(() => block));
    // A range of both blocks has the charge and the release; a range after them has neither.
    const range = await fetchAll(
      `chain=31337&from_block=${charged.receipt.blockNumber}&to_block=${block}`,
      1000,
    );
    expect(range.map((e) => e.transaction_hash)).toEqual(
      expect.arrayContaining([charged.hash, released.hash]),
    );
    for (const e of range) {
      expect(e.block_number).toBeGreaterThanOrEqual(Number(charged.receipt.blockNumber));
      expect(e.block_number).toBeLessThanOrEqual(block);
    }
    const after = await fetchAll(`chain=31337&from_block=${block + 1}&to_block=${block + 1000}`, 1000);
    expect(after.map((e) => e.transaction_hash)).not.toContain(released.hash);
    const stranger = await newMerchantWithKey();
    expect((await api("/v1/reconciliation", { key: stranger.key })).json.data).toEqual([]);
    for (const [query, param] of [
      ["limit=0", "limit"],
      ["limit=abc", "limit"],
      ["chain=31338", "chain"],
      ["from_block=-1", "from_block"],
      ["format=xml", "format"],
      ["colour=red", "colour"],
    ]) {
      const response = await api(`/v1/reconciliation?${query}`);
      expect(response.status, query).toBe(400);
      expect(expectErrorShape(response.json).param, query).toBe(param);
    }
  });

  it("lists none of a deposit someone else deployed with the merchant's payout address and payment id", async () => {
    const chain = chainDriver(31337);
    const victim = await merchantOnTestChain();
    const created = await victim.call("/v1/payments", { amount_decimal: "3" });
    expect(created.status, created.text).toBe(200);
    const payment = created.json;
    expect((await victim.call(`/v1/test/payments/${payment.id}/pay`, { amount_decimal: "3" })).status).toBe(
      200,
    );
    await victim.waitForEvents("payment.paid", 1, (o) => o.id === payment.id);

    // The attacker's deposit: the victim's payout address and on-chain payment id, the attacker as the
    // operator who may return a hold. Anyone may sweep it; its operator returns it to itself.
    // The payment id is public: the victim's PaymentReceived log carries it.
    const [victimPayment] = await query<{ onchain_id: Hex }>(
      "SELECT onchain_id FROM billing.payments WHERE id = $1",
      [payment.id],
    );
    const attacker = await chain.newStranger();
    const planted = {
      paymentId: victimPayment?.onchain_id as Hex,
      payee: victim.payoutAddress,
      token: chain.usdc,
      operator: attacker.address,
      holdSeconds: 3600n,
    };
    const address = await chain.client.readContract({
      address: chain.escrow,
      abi: MandateEscrowAbi,
      functionName: "depositAddress",
      args: [planted],
    });
    await chain.mint(address, usd("2"));
    const plantedSweep = await chain.call(attacker, chain.escrow, MandateEscrowAbi, "sweep", [[planted]]);
    const plantedReturn = await chain.call(attacker, chain.escrow, MandateEscrowAbi, "returnPayment", [
      planted,
      attacker.address,
    ]);
    await relaySettled(31337);

    // The chain's facts name the victim, and the relay declined both (no payment of the victim's has
    // that deposit address).
    const facts = await query<{ key: string; kind: string }>(
      "SELECT key, kind FROM onchain.fact WHERE lower(details->>'deposit_address') = lower($1) ORDER BY kind",
      [address],
    );
    expect(facts.map((f) => f.kind)).toEqual(["payment.received", "payment.returned"]);
    const skipped = await query<{ reason: string }>(
      "SELECT reason FROM billing.skipped_facts WHERE fact_key = ANY($1::text[])",
      [facts.map((f) => f.key)],
    );
    expect(skipped.map((r) => r.reason)).toEqual(["payment_unknown", "payment_unknown"]);

    const rows = (await api("/v1/reconciliation?limit=10000", { key: victim.key })).json.data as Array<
      Entry & { deposit_address: string | null; payment_id: string | null }
    >;
    expect(rows.filter((r) => r.deposit_address?.toLowerCase() === address.toLowerCase())).toEqual([]);
    // Its own payment is there: the filter is not empty-handed.
    expect(
      rows.filter((r) => r.deposit_address?.toLowerCase() === String(payment.address).toLowerCase()).length,
    ).toBeGreaterThan(0);
    // Nor in its ledger, which holds its own payment's sweep.
    const ledger = (await api("/v1/balance_transactions?limit=100", { key: victim.key })).json.data as Array<{
      transaction_hash: string;
      source: string;
    }>;
    expect(ledger.map((t) => t.source)).toContain(payment.id);
    expect(
      ledger.filter((t) => [plantedSweep.hash, plantedReturn.hash].includes(t.transaction_hash as Hex)),
    ).toEqual([]);
  });

  it("lists a payout address's facts only on the chain where it is the merchant's", async () => {
    const shared = newAddress();
    const a = await newMerchantWithKey();
    const b = await newMerchantWithKey();
    const configure = async (key: string, chainId: number) =>
      expect(
        (await api("/v1/merchant/chains", { key, body: { chain: chainId, payout_address: shared } })).status,
      ).toBe(200);
    await configure(a.key, 31337);
    await configure(b.key, 31339);
    // B's payment on 31339, paid to the address A uses on 31337.
    const created = await api("/v1/payments", { key: b.key, body: { amount_decimal: "5", chain: 31339 } });
    expect(created.status, created.text).toBe(200);
    const paid = await api(`/v1/test/payments/${created.json.id}/pay`, {
      key: b.key,
      body: { amount_decimal: "5" },
    });
    expect(paid.status, paid.text).toBe(200);
    // 31339 waits for 2 confirmations and mines only on demand: blocks on top until the payment is paid.
    const other = chainDriver(31339);
    await waitFor(
      async () => {
        await other.mine();
        return (await api(`/v1/payments/${created.json.id}`, { key: b.key })).json.status === "paid";
      },
      { timeoutMs: 60_000, intervalMs: 250, what: "B's payment on 31339 paid" },
    );
    await relaySettled(31339);

    const ofB = (await api("/v1/reconciliation?limit=10000", { key: b.key })).json.data as Array<{
      chain: number;
    }>;
    expect(ofB.length).toBeGreaterThan(0);
    expect(ofB.map((r) => r.chain)).toEqual(ofB.map(() => 31339));
    expect((await api("/v1/reconciliation?limit=10000", { key: a.key })).json.data).toEqual([]);
    const ledgerOfB = (await api("/v1/balance_transactions?limit=100", { key: b.key })).json.data as Array<{
      chain: number;
    }>;
    expect(ledgerOfB.length).toBeGreaterThan(0);
    expect(ledgerOfB.map((t) => t.chain)).toEqual(ledgerOfB.map(() => 31339));
    expect((await api("/v1/balance_transactions", { key: a.key })).json.data).toEqual([]);
    expect((await api("/v1/balance", { key: a.key })).json.amounts).toEqual([]);
  });
});
