import { describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver, DEV_PAYOUT, usd } from "./chain-driver.ts";
import { api, expectErrorShape, newMerchantWithKey } from "./helpers.ts";

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

    const csv = await api("/v1/reconciliation?chain=31337&limit=10000&format=csv");
    expect(csv.headers.get("content-type")).toContain("text/csv");
    const lines = csv.text.trim().split("\n");
    expect(lines[0]).toBe(
      "type,chain,block_number,block_hash,timestamp,transaction_hash,log_index,mandate,charge_id,period,token,token_address,amount,amount_decimal,customer_address,payee_address,confirmations,livemode,payment_id,deposit_address",
    );
    expect(lines).toHaveLength(fromChain.length + 1);
    expect(lines.some((line) => line.includes(",1000001,1.000001,"))).toBe(true);
  });

  it("filters by type and block range, shows a merchant only its own, and refuses bad filters", async () => {
    const releases = await fetchAll("chain=31337&type=release", 1000);
    expect(releases.every((e) => e.type === "release")).toBe(true);
    const first = releases[0];
    if (first) {
      const one = await fetchAll(
        `chain=31337&from_block=${first.block_number}&to_block=${first.block_number}`,
        1000,
      );
      expect(one.every((e) => e.block_number === first.block_number)).toBe(true);
    }
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
});
