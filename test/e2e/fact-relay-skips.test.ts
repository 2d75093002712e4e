/**
 * The fact relay's cursor: facts it cannot apply are skipped and counted instead of holding it (the
 * contract accepts any token, so anyone can send junk to a merchant's payout address), an address
 * registered late still gets its history, and a reorg below the cursor rewinds it.
 */

import { encodeFunctionData, type Hex, type PrivateKeyAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import { mandateIdFor, TERMS_TYPES } from "../contract/harness.ts";
import { chainDriver, DEV_PAYOUT, operator, usd } from "./chain-driver.ts";
import { api, type EventOf, newAddress, newMerchantWithKey, query } from "./helpers.ts";

const CHAIN = 31337;

const skippedCount = async () =>
  Number(
    (
      await query<{ n: string }>(
        "SELECT coalesce(sum(skipped_facts), 0)::text AS n FROM billing.fact_relay_cursors WHERE chain_id = $1",
        [CHAIN],
      )
    )[0]?.n ?? 0,
  );

const merchantWithPayout = async (payout: string) => {
  const { key } = await newMerchantWithKey("test");
  const configured = await api("/v1/merchant/chains", {
    key,
    body: { chain: CHAIN, payout_address: payout },
  });
  expect(configured.status, configured.text).toBe(200);
  const call = (path: string, body?: unknown) => api(path, body === undefined ? { key } : { key, body });
  const waitForEvent = async (type: string, objectId?: string) => {
    let found: EventOf | undefined;
    await waitFor(
      async () => {
        const events = (await call(`/v1/events?type=${type}&limit=100`)).json.data as EventOf[];
        found = events.find((e) => objectId === undefined || e.data.object.id === objectId);
        return found !== undefined;
      },
      { timeoutMs: 60_000, intervalMs: 100, what: `${type} ${objectId ?? ""}` },
    );
    return found as EventOf;
  };
  return { key, call, waitForEvent };
};

describe("fact relay cursor", () => {
  it("skips and counts 600 facts it cannot apply, and still reports the next real charge", async () => {
    const chain = chainDriver(CHAIN);
    const payout = newAddress();
    const m = await merchantWithPayout(payout);
    const before = await skippedCount();

    // Signed by customers straight to the escrow, naming the merchant's payout address: 550 mandates in
    // a token the chain does not list, then 50 of them revoked by their customers (mandates unknown).
    const now = Number((await chain.client.getBlock()).timestamp);
    const junkToken = newAddress();
    const customers: PrivateKeyAccount[] = [];
    const raws: Hex[] = [];
    let nonce = await chain.client.getTransactionCount({ address: operator.address, blockTag: "pending" });
    const fees = await chain.client.estimateFeesPerGas();
    const sign = (account: PrivateKeyAccount, data: Hex, txNonce: number, to = chain.escrow) =>
      account.signTransaction({
        chainId: CHAIN,
        type: "eip1559",
        to,
        data,
        nonce: txNonce,
        gas: 300_000n,
        maxFeePerGas: fees.maxFeePerGas * 2n,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      });
    for (let i = 0; i < 550; i++) {
      const customer = privateKeyToAccount(generatePrivateKey());
      customers.push(customer);
      const terms = {
        mandateId: mandateIdFor(customer.address, BigInt(i + 1)),
        payee: payout,
        token: junkToken,
        cap: usd("10"),
        anchor: BigInt(now),
        approvalPeriods: 12,
        operator: operator.address,
        holdSeconds: 0n,
        nonce: 1n,
        deadline: BigInt(now + 3600),
      };
      const signature = await customer.signTypedData({
        domain: { name: "MandateEscrow", version: "1", chainId: CHAIN, verifyingContract: chain.escrow },
        types: TERMS_TYPES,
        primaryType: "Terms",
        message: terms,
      });
      const data = encodeFunctionData({
        abi: MandateEscrowAbi,
        functionName: "authorize",
        args: [terms, signature],
      });
      raws.push(await sign(operator, data, nonce++));
    }
    const revokers = customers.slice(0, 50);
    for (const customer of revokers)
      await chain.rpc("anvil_setBalance", [customer.address, "0xde0b6b3a7640000"]);

    // In a few blocks (one per block would be 600 blocks for the indexer to fetch).
    const mineAll = async (batch: Hex[]) => {
      await chain.rpc("evm_setAutomine", [false]);
      try {
        const hashes: Hex[] = [];
        for (const raw of batch)
          hashes.push(await chain.client.sendRawTransaction({ serializedTransaction: raw }));
        const last = hashes[hashes.length - 1] as Hex;
        await waitFor(
          async () => {
            await chain.rpc("evm_mine", []);
            return (
              (await chain.client.getTransactionReceipt({ hash: last }).catch(() => undefined)) !== undefined
            );
          },
          { timeoutMs: 30_000, intervalMs: 10, what: "the junk transactions to be mined" },
        );
        for (const hash of [hashes[0] as Hex, last])
          expect((await chain.client.getTransactionReceipt({ hash })).status).toBe("success");
      } finally {
        await chain.rpc("evm_setAutomine", [true]);
      }
    };
    await mineAll(raws);
    await mineAll(
      await Promise.all(
        revokers.map((customer, i) =>
          sign(
            customer,
            encodeFunctionData({
              abi: MandateEscrowAbi,
              functionName: "revoke",
              args: [mandateIdFor(customer.address, BigInt(i + 1))],
            }),
            0,
          ),
        ),
      ),
    );

    // A real mandate and charge through the API, after the junk.
    const created = await m.call("/v1/mandates", {
      cap_decimal: "25",
      period: "month",
      customer: "cus_after_junk",
      reference: "order_1",
    });
    expect(created.status, created.text).toBe(200);
    const mandate = created.json as { id: string };
    expect((await m.call(`/v1/test/mandates/${mandate.id}/fund`, { amount_decimal: "30" })).status).toBe(200);
    const authorized = await m.call(`/v1/test/mandates/${mandate.id}/authorize`, {});
    expect(authorized.status, authorized.text).toBe(200);
    const charge = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "12.5" });
    expect(charge.status, charge.text).toBe(200);
    const event = await m.waitForEvent("charge.succeeded", charge.json.id);
    expect(event.data.object).toMatchObject({
      id: charge.json.id,
      status: "succeeded",
      amount_decimal: "12.5",
    });

    expect((await skippedCount()) - before).toBe(600);
    const reasons = await query<{ reason: string; kind: string; n: number }>(
      `SELECT reason, kind, count(*)::int AS n FROM billing.skipped_facts WHERE payee = $1
       GROUP BY reason, kind ORDER BY reason`,
      [payout.toLowerCase()],
    );
    expect(reasons).toEqual([
      { reason: "mandate_unknown", kind: "mandate.revoked", n: 50 },
      { reason: "token_not_accepted", kind: "mandate.authorized", n: 550 },
    ]);
    // None of the junk became a record or an event.
    const junk = await query<{ n: number }>(
      "SELECT count(*)::int AS n FROM billing.mandates WHERE lower(token_address) = $1",
      [junkToken.toLowerCase()],
    );
    expect(junk[0]?.n).toBe(0);
  });

  it("relays the history of a payout address registered after the cursor passed its facts", async () => {
    const chain = chainDriver(CHAIN);
    const payout = newAddress();
    const customer = await chain.newCustomer();
    const { mandateId } = await chain.authorize(customer, { payee: payout });
    const charged = await chain.charge(mandateId, usd("4"));
    // Not ours yet: the cursor moves past both facts.
    await waitFor(
      async () => {
        const [row] = await query<{ block: string | null }>(
          "SELECT block_number::text AS block FROM billing.fact_relay_cursors WHERE chain_id = $1",
          [CHAIN],
        );
        return row?.block != null && BigInt(row.block) >= charged.receipt.blockNumber;
      },
      { timeoutMs: 15_000, intervalMs: 50, what: "the relay cursor to pass the charge" },
    );
    const m = await merchantWithPayout(payout);
    const authorized = await m.waitForEvent("mandate.authorized");
    expect(authorized.data.object).toMatchObject({ status: "active" });
    const succeeded = await m.waitForEvent("charge.succeeded");
    expect(succeeded.data.object).toMatchObject({
      amount_decimal: "4",
      mandate: authorized.data.object.id,
      onchain: { transaction_hash: charged.hash },
    });
    const [backfill] = await query<{ done: boolean }>(
      "SELECT done_at IS NOT NULL AS done FROM billing.fact_relay_backfills WHERE chain_id = $1 AND payee = $2",
      [CHAIN, payout.toLowerCase()],
    );
    expect(backfill?.done).toBe(true);
  });

  it("with 0 confirmations, rewinds when a reorg puts a new fact before the cursor in a replaced block", async () => {
    const chain = chainDriver(CHAIN);
    const customer = await chain.newCustomer();
    const { mandateId } = await chain.authorize(customer);
    // Another customer's authorization, never mined before the reorg puts it in the charge's block,
    // paid for by its own sender with a higher tip so it comes first: its fact sits under the cursor.
    const other = await chain.newCustomer();
    const sender = privateKeyToAccount(generatePrivateKey());
    await chain.rpc("anvil_setBalance", [sender.address, "0xde0b6b3a7640000"]);
    // In a block of its own: the reorg below rolls back the state of the charge's block only.
    await chain.mine(1);
    const now = Number((await chain.client.getBlock()).timestamp);
    const terms = {
      mandateId: mandateIdFor(other.address, 7n),
      payee: DEV_PAYOUT,
      token: chain.usdc,
      cap: usd("5"),
      anchor: BigInt(now),
      approvalPeriods: 12,
      operator: operator.address,
      holdSeconds: 0n,
      nonce: 1n,
      deadline: BigInt(now + 3600),
    };
    const signature = await other.signTypedData({
      domain: { name: "MandateEscrow", version: "1", chainId: CHAIN, verifyingContract: chain.escrow },
      types: TERMS_TYPES,
      primaryType: "Terms",
      message: terms,
    });
    const fees = await chain.client.estimateFeesPerGas();
    const raw = await sender.signTransaction({
      chainId: CHAIN,
      type: "eip1559",
      to: chain.escrow,
      data: encodeFunctionData({
        abi: MandateEscrowAbi,
        functionName: "authorize",
        args: [terms, signature],
      }),
      nonce: 0,
      gas: 300_000n,
      maxFeePerGas: fees.maxFeePerGas * 10n,
      maxPriorityFeePerGas: fees.maxFeePerGas * 5n,
    });
    const charged = await chain.charge(mandateId, usd("1"));
    await waitFor(
      async () => (await query("SELECT 1 FROM billing.events WHERE tx_hash = $1", [charged.hash])).length > 0,
      { timeoutMs: 15_000, intervalMs: 25, what: "the charge's event (the cursor at it)" },
    );
    await chain.reorg(1, [raw, charged.raw]);
    await chain.mine(1);
    const newId = terms.mandateId.toLowerCase();
    await waitFor(
      async () =>
        (await query("SELECT 1 FROM onchain.fact WHERE mandate_id = $1", [newId])).length > 0 &&
        (await query("SELECT 1 FROM onchain.fact WHERE tx_hash = $1", [charged.hash])).length > 0,
      { timeoutMs: 15_000, intervalMs: 25, what: "the indexer to see the new branch" },
    );
    const placed = await query<{ kind: string; block_number: string; log_index: number }>(
      `SELECT kind, block_number::text, log_index FROM onchain.fact
       WHERE mandate_id = $1 OR (mandate_id = $2 AND kind = 'charge.succeeded')`,
      [newId, mandateId],
    );
    const authorization = placed.find((f) => f.kind === "mandate.authorized");
    const charge = placed.find((f) => f.kind === "charge.succeeded");
    // The case under test: the new fact is in the charge's block, before it.
    expect(authorization?.block_number).toBe(charge?.block_number);
    expect(authorization?.log_index).toBeLessThan(charge?.log_index ?? 0);
    await waitFor(
      async () =>
        (await query("SELECT 1 FROM billing.mandates WHERE onchain_id = $1 AND status = 'active'", [newId]))
          .length > 0,
      { timeoutMs: 15_000, intervalMs: 50, what: "the reorged-in authorization to be relayed" },
    );
    const events = await query<{ type: string }>(
      "SELECT type FROM billing.events WHERE tx_hash = $1 OR fact_key LIKE $2",
      [charged.hash, `%${newId}%`],
    );
    expect(events.map((e) => e.type).sort()).toEqual(["charge.succeeded", "mandate.authorized"]);
  });
});
