/**
 * Mandates and charges end to end, on the real stack: every outcome of the spec's transitions table,
 * the dunning walk-through with the test helpers, escrow holds (automatic release, merchant return),
 * and a charge that passes simulation but reverts on chain (a race).
 */
import { decodeFunctionData, encodeFunctionData, parseEventLogs } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import { periodStart } from "../../src/ledger/period.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import {
  api,
  type EventOf,
  expectErrorShape,
  merchantOnTestChain,
  newAddress,
  newMerchantWithKey,
  query,
  stack,
} from "./helpers.ts";
import { relaySettled, workerPassed } from "./settle.ts";

const MONTH = 31 * 86_400;

/** What a transaction moved of the chain's USDC from `from` to `to` (its receipt's Transfer logs). */
const moved = async (hash: string, from: string, to: string) =>
  (await chainDriver(31337).usdcTransfers(hash as `0x${string}`))
    .filter((t) => t.from === from.toLowerCase() && t.to === to.toLowerCase())
    .reduce((sum, t) => sum + t.value, 0n);

/** A merchant of its own on chain 31337, with waits for one object's event and a charge's status. */
const merchant = async () => {
  const m = await merchantOnTestChain();
  const waitForEvent = async (type: string, objectId: string) =>
    (await m.waitForEvents(type, 1, (object) => object.id === objectId))[0] as EventOf;
  const waitForCharge = async (id: string, status: string) => {
    await waitFor(async () => (await m.call(`/v1/charges/${id}`)).json.status === status, {
      timeoutMs: 20_000,
      intervalMs: 100,
      what: `charge ${id} to be ${status}`,
    });
    return (await m.call(`/v1/charges/${id}`)).json;
  };
  return { ...m, waitForEvent, waitForCharge };
};

const openMandate = async (m: Awaited<ReturnType<typeof merchant>>, extra: Record<string, unknown> = {}) => {
  const created = await m.call("/v1/mandates", {
    cap_decimal: "25",
    period: "month",
    customer: "cus_123",
    reference: "order_1",
    ...extra,
  });
  expect(created.status, created.text).toBe(200);
  return created.json as { id: string; authorization_url: string; [k: string]: unknown };
};

describe("mandates", () => {
  it("opens a mandate with its terms, link and defaults, and reads it back and in lists", async () => {
    const m = await merchant();
    const mandate = await openMandate(m);
    expect(mandate).toMatchObject({
      object: "mandate",
      livemode: false,
      status: "pending",
      chain: 31337,
      token: "USDC",
      cap: "25000000",
      cap_decimal: "25",
      period: "month",
      approval_periods: 12,
      approval_decimal: "300",
      approval_left_decimal: null,
      customer: "cus_123",
      reference: "order_1",
      customer_address: null,
      hold_seconds: 3600,
      origin: "api",
    });
    expect(mandate.id).toMatch(/^mdt_[0-9A-Z]{26}$/);
    expect(mandate.authorization_url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/authorize\/[A-Za-z0-9_-]{32}$/);
    expect((await m.call(`/v1/mandates/${mandate.id}`)).json).toEqual(mandate);
    const other = await openMandate(m, { customer: "cus_other", approval_periods: 3 });
    expect(other.approval_decimal).toBe("75");
    const listed = await m.call("/v1/mandates?limit=1");
    expect(listed.json.data.map((x: { id: string }) => x.id)).toEqual([other.id]);
    expect(listed.json.has_more).toBe(true);
    const next = await m.call(`/v1/mandates?limit=1&starting_after=${other.id}`);
    expect(next.json.data.map((x: { id: string }) => x.id)).toEqual([mandate.id]);
    // Paging back: the newer objects just before the cursor, still newest first.
    const third = await openMandate(m, { customer: "cus_third" });
    const back = await m.call(`/v1/mandates?limit=1&ending_before=${mandate.id}`);
    expect(back.json.data.map((x: { id: string }) => x.id)).toEqual([other.id]);
    expect(back.json.has_more).toBe(true);
    const backAll = await m.call(`/v1/mandates?ending_before=${mandate.id}`);
    expect(backAll.json.data.map((x: { id: string }) => x.id)).toEqual([third.id, other.id]);
    expect(backAll.json.has_more).toBe(false);
    const both = await m.call(`/v1/mandates?starting_after=${other.id}&ending_before=${mandate.id}`);
    expect(both.status).toBe(400);
    expect(expectErrorShape(both.json)).toMatchObject({ code: "parameter_conflict", param: "ending_before" });
    const byCustomer = await m.call("/v1/mandates?customer=cus_123&status=pending");
    expect(byCustomer.json.data.map((x: { id: string }) => x.id)).toEqual([mandate.id]);
  });

  it("refuses another period, a closed chain, and another merchant's mandate", async () => {
    const m = await merchant();
    const weekly = await m.call("/v1/mandates", {
      cap_decimal: "5",
      period: "week",
      customer: "c",
      reference: "r",
    });
    expect(weekly.status).toBe(400);
    expect(expectErrorShape(weekly.json)).toMatchObject({ code: "period_unsupported", param: "period" });

    await m.call("/v1/merchant/chains", { chain: 31339, payout_address: newAddress() });
    const closed = await m.call("/v1/mandates", {
      cap_decimal: "5",
      period: "month",
      customer: "c",
      reference: "r",
      chain: 31339,
    });
    expect(closed.status).toBe(400);
    const error = expectErrorShape(closed.json);
    expect(error.code).toBe("chain_closed");
    expect(error.message).toMatch(/subscriptions_available is false/);

    const mandate = await openMandate(m);
    const stranger = await merchant();
    expect((await stranger.call(`/v1/mandates/${mandate.id}`)).status).toBe(404);
    expect((await stranger.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "1" })).status).toBe(
      404,
    );
  });
});

describe("charges: the transitions table and the dunning walk-through", () => {
  it("fund, authorize, charge until funds run out, top up, charge again; exhaust approval, re-sign, charge", async () => {
    const m = await merchant();
    const mandate = await openMandate(m, { approval_periods: 3 });

    // Not signed yet: nothing can be charged.
    const early = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "10" });
    expect(expectErrorShape(early.json).code).toBe("mandate_not_authorized");

    const funded = await m.call(`/v1/test/mandates/${mandate.id}/fund`, { amount_decimal: "40" });
    expect(funded.status, funded.text).toBe(200);
    expect(funded.json).toMatchObject({
      object: "test_funding",
      amount_decimal: "40",
      balance_decimal: "40",
    });

    // Customer signs: mandate.authorized, the only report that the customer signed.
    const authorized = await m.call(`/v1/test/mandates/${mandate.id}/authorize`, {});
    expect(authorized.status, authorized.text).toBe(200);
    expect(authorized.json).toMatchObject({
      status: "active",
      customer_address: funded.json.customer_address,
      signature_version: 1,
      approval_left_decimal: "75",
    });
    const authorizedEvent = await m.waitForEvent("mandate.authorized", mandate.id);
    expect(authorizedEvent.data.object).toMatchObject({ id: mandate.id, status: "active" });

    // Above the cap: refused, nothing recorded.
    const above = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "25.000001" });
    expect(above.status).toBe(400);
    expect(expectErrorShape(above.json)).toMatchObject({
      code: "mandate_cap_exceeded",
      param: "amount_decimal",
    });

    // Money left the customer: charge.succeeded (held, so not yet the merchant's).
    const first = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "25" });
    expect(first.status, first.text).toBe(200);
    expect(first.json).toMatchObject({
      object: "charge",
      status: "pending",
      amount_decimal: "25",
      period: 0,
    });
    expect(first.json.id).toMatch(/^ch_/);
    const succeeded = await m.waitForEvent("charge.succeeded", first.json.id);
    expect(succeeded.data.object).toMatchObject({ status: "succeeded", held: true, mandate: mandate.id });
    // On chain: the 25 left the customer for the escrow, which holds it.
    const chain = chainDriver(31337);
    const customer = funded.json.customer_address as `0x${string}`;
    const chargeHash = (succeeded.data.object.onchain as { transaction_hash: string }).transaction_hash;
    expect(await moved(chargeHash, customer, chain.escrow)).toBe(usd("25"));
    expect(await chain.balanceOf(customer)).toBe(usd("15"));

    // A second charge in the period: its own code.
    const again = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "1" });
    expect(again.status).toBe(400);
    expect(expectErrorShape(again.json).code).toBe("period_already_charged");

    // The hold ends: the service releases it, charge.released (the merchant has the money).
    const payoutBefore = await chain.balanceOf(m.payoutAddress);
    await m.advance(3601);
    const released = await m.waitForEvent("charge.released", first.json.id);
    expect(released.data.object).toMatchObject({ status: "released", pending_action: null });
    // On chain: the payout address holds exactly the 25 more, moved from the escrow by the release.
    const releaseHash = (released.data.object.ended_onchain as { transaction_hash: string }).transaction_hash;
    expect(await moved(releaseHash, chain.escrow, m.payoutAddress)).toBe(usd("25"));
    expect((await chain.balanceOf(m.payoutAddress)) - payoutBefore).toBe(usd("25"));

    // Next month, 15 left in the wallet: insufficient_funds, mandate.insufficient, mandate still valid.
    await m.advance(MONTH);
    const short = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "25" });
    expect(short.status, short.text).toBe(200);
    expect(short.json).toMatchObject({ status: "failed", failure_code: "insufficient_funds", period: 1 });
    const insufficient = await m.waitForEvent("mandate.insufficient", mandate.id);
    expect(insufficient.data.object).toMatchObject({ status: "active", latest_charge: short.json.id });
    expect((await m.call(`/v1/mandates/${mandate.id}`)).json.status).toBe("active");

    // Top up and charge again in the same period.
    await m.call(`/v1/test/mandates/${mandate.id}/fund`, { amount_decimal: "100" });
    const retried = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "25" });
    expect(retried.json).toMatchObject({ status: "pending", period: 1 });
    await m.waitForCharge(retried.json.id, "succeeded");

    // Month 2 spends what is left of the approval (3 × 25 = 75).
    await m.advance(MONTH);
    const third = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "25" });
    await m.waitForCharge(third.json.id, "succeeded");
    await waitFor(
      async () => (await m.call(`/v1/mandates/${mandate.id}`)).json.approval_left_decimal === "0",
      {
        timeoutMs: 10_000,
        what: "the approval to be spent",
      },
    );

    // Month 3: approval_exhausted, mandate.requires_authorization; the same link re-signs the same mandate.
    await m.advance(MONTH);
    const exhausted = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "25" });
    expect(exhausted.json).toMatchObject({ status: "failed", failure_code: "approval_exhausted" });
    const requires = await m.waitForEvent("mandate.requires_authorization", mandate.id);
    expect(requires.data.object).toMatchObject({
      status: "requires_authorization",
      authorization_url: mandate.authorization_url,
    });
    const resigned = await m.call(`/v1/test/mandates/${mandate.id}/authorize`, {});
    expect(resigned.json).toMatchObject({
      id: mandate.id,
      status: "active",
      signature_version: 2,
      approval_left_decimal: "75",
      authorization_url: mandate.authorization_url,
    });
    const after = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "25" });
    expect(after.json).toMatchObject({ status: "pending", period: 3 });
    await m.waitForCharge(after.json.id, "succeeded");

    // Newest first; each month's advance also ended the holds of the months before, and the service
    // releases them on its own.
    const statuses = async () =>
      (await m.call(`/v1/mandates/${mandate.id}/charges?limit=100`)).json.data.map(
        (c: { status: string }) => c.status,
      );
    await waitFor(
      async () => (await statuses()).join() === "succeeded,failed,released,released,failed,released",
      {
        timeoutMs: 15_000,
        what: `the charges' statuses (${(await statuses()).join()})`,
      },
    );
    // On chain: the payout address holds the three released charges, the escrow still the fourth;
    // the customer paid the four (funded 40 + 100) and nothing for the two that failed.
    expect((await chain.balanceOf(m.payoutAddress)) - payoutBefore).toBe(usd("75"));
    expect(await chain.balanceOf(customer)).toBe(usd("40"));
  });

  it("releases several holds that end together in one releaseMany transaction", async () => {
    const m = await merchant();
    const charges: string[] = [];
    for (const customer of ["cus_batch_1", "cus_batch_2", "cus_batch_3"]) {
      const mandate = await openMandate(m, { customer });
      await m.call(`/v1/test/mandates/${mandate.id}/fund`, { amount_decimal: "100" });
      await m.call(`/v1/test/mandates/${mandate.id}/authorize`, {});
      const charge = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "10" });
      expect(charge.status, charge.text).toBe(200);
      charges.push(charge.json.id);
    }
    for (const id of charges) await m.waitForCharge(id, "succeeded");
    const payoutBefore = await chainDriver(31337).balanceOf(m.payoutAddress);
    await m.advance(3601);
    const released = [];
    for (const id of charges) released.push(await m.waitForCharge(id, "released"));
    const transactions = new Set(released.map((c) => c.ended_onchain.transaction_hash));
    expect(transactions.size, "the three releases' transactions").toBe(1);
    expect(new Set(released.map((c) => c.ended_onchain.log_index)).size).toBe(3);
    // On chain: the batch moved the three charges' sum from the escrow to the payout address, which
    // holds exactly that more (the escrow pays a payee's releases of a batch in one transfer).
    const chain = chainDriver(31337);
    expect(await moved([...transactions][0] as string, chain.escrow, m.payoutAddress)).toBe(usd("30"));
    expect((await chain.balanceOf(m.payoutAddress)) - payoutBefore).toBe(usd("30"));
    // The relayer's record of that transaction: one releaseMany call naming all three charges.
    const [sent] = await query<{ data: string }>(
      "SELECT data FROM billing.relayer_transactions WHERE $1 = ANY (hashes)",
      [[...transactions][0]],
    );
    const call = decodeFunctionData({ abi: MandateEscrowAbi, data: sent?.data as `0x${string}` });
    expect(call.functionName).toBe("releaseMany");
    expect(((call.args ?? [])[0] as readonly string[]).length).toBeGreaterThanOrEqual(3);
  });

  it("mines a release batch one of whose charges a stranger released first, and ends every charge once", async () => {
    const m = await merchant();
    const chain = chainDriver(31337);
    const charges: { id: string; mandate: string }[] = [];
    for (const customer of ["cus_front_1", "cus_front_2", "cus_front_3"]) {
      const mandate = await openMandate(m, { customer });
      await m.call(`/v1/test/mandates/${mandate.id}/fund`, { amount_decimal: "100" });
      await m.call(`/v1/test/mandates/${mandate.id}/authorize`, {});
      const charge = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "10" });
      expect(charge.status, charge.text).toBe(200);
      charges.push({ id: charge.json.id, mandate: mandate.id });
    }
    const succeeded = [];
    for (const { id } of charges) succeeded.push(await m.waitForCharge(id, "succeeded"));
    const onchainIds: `0x${string}`[] = [];
    for (const { mandate } of charges)
      onchainIds.push((await m.call(`/v1/mandates/${mandate}`)).json.onchain_id as `0x${string}`);
    const stranger = await chain.newStranger();
    const payoutBefore = await chain.balanceOf(m.payoutAddress);
    const charge = async (id: string) => (await m.call(`/v1/charges/${id}`)).json;

    // Chain time passes every hold's end without a transaction; the stranger's release of the middle
    // charge waits in the mempool with a higher tip, and the service's batch (all three) joins it.
    await chain.rpc("evm_setAutomine", [false]);
    let frontRun: `0x${string}`;
    try {
      await chain.increaseTime(3601);
      await chain.mine();
      frontRun = await chain.sendAhead(
        stranger,
        chain.escrow,
        encodeFunctionData({
          abi: MandateEscrowAbi,
          functionName: "release",
          args: [onchainIds[1] as `0x${string}`, succeeded[1].period],
        }),
      );
      await waitFor(
        async () =>
          (await Promise.all(charges.map(({ id }) => charge(id)))).every(
            (c) => c.pending_action === "release",
          ),
        {
          timeoutMs: 20_000,
          intervalMs: 100,
          what: "the service's release of the three charges to be submitted",
        },
      );
      // pending_action is recorded before the relayer broadcasts: mine only once the node holds the
      // batch beside the stranger's release (a loaded machine mined the block between the two).
      await waitFor(
        async () => {
          const pool = (await chain.rpc("txpool_status", [])) as { pending: `0x${string}` | number };
          return Number(pool.pending) >= 2;
        },
        { timeoutMs: 20_000, intervalMs: 50, what: "the service's batch in the node's pool" },
      );
      await chain.rpc("evm_mine", []);
    } finally {
      await chain.rpc("evm_setAutomine", [true]);
    }

    const released = [];
    for (const { id } of charges) released.push(await m.waitForCharge(id, "released"));
    for (const c of released) expect(c.pending_action).toBeNull();
    expect(released[1].ended_onchain.transaction_hash).toBe(frontRun);
    const batchHash = released[0].ended_onchain.transaction_hash as `0x${string}`;
    expect(batchHash).not.toBe(frontRun);
    expect(released[2].ended_onchain.transaction_hash).toBe(batchHash);
    // One block: the stranger's release, then the batch, which mined (no revert) and named all three.
    const first = await chain.client.getTransactionReceipt({ hash: frontRun });
    const batch = await chain.client.getTransactionReceipt({ hash: batchHash });
    expect(batch.status).toBe("success");
    expect(batch.blockNumber).toBe(first.blockNumber);
    expect(batch.transactionIndex).toBeGreaterThan(first.transactionIndex);
    const [sent] = await query<{ data: string; status: string }>(
      "SELECT data, status FROM billing.relayer_transactions WHERE $1 = ANY (hashes)",
      [batchHash],
    );
    expect(sent?.status).not.toBe("reverted");
    const call = decodeFunctionData({ abi: MandateEscrowAbi, data: sent?.data as `0x${string}` });
    expect(call.functionName).toBe("releaseMany");
    const named = ((call.args ?? [])[0] as readonly string[]).map((id) => id.toLowerCase());
    for (const id of onchainIds) expect(named).toContain(id.toLowerCase());
    // The batch passed over the stranger's charge: its Released events are the two others' only.
    const batchReleased = parseEventLogs({ abi: MandateEscrowAbi, logs: batch.logs, eventName: "Released" });
    const ours = batchReleased.filter((e) => onchainIds.some((id) => id.toLowerCase() === e.args.mandateId));
    expect(ours.map((e) => e.args.mandateId).sort()).toEqual(
      [onchainIds[0], onchainIds[2]].map((id) => id?.toLowerCase()).sort(),
    );
    expect((await chain.balanceOf(m.payoutAddress)) - payoutBefore).toBe(usd("30"));
    // Counted once the hold releaser made a whole pass since and the relay read past a later fact.
    await workerPassed("hold-releaser");
    await relaySettled(31337);
    const events = await m.events("charge.released");
    for (const { id } of charges) expect(events.filter((e) => e.data.object.id === id)).toHaveLength(1);
  });

  it("returns a held charge during its hold (charge.returned), and refuses once the hold is over", async () => {
    const m = await merchant();
    const mandate = await openMandate(m);
    const funded = await m.call(`/v1/test/mandates/${mandate.id}/fund`, { amount_decimal: "100" });
    await m.call(`/v1/test/mandates/${mandate.id}/authorize`, {});
    const charge = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "10" });
    await m.waitForCharge(charge.json.id, "succeeded");
    const chain = chainDriver(31337);
    const customer = funded.json.customer_address as `0x${string}`;
    const customerBefore = await chain.balanceOf(customer);
    const returning = await m.call(`/v1/charges/${charge.json.id}/return`, {});
    expect(returning.status, returning.text).toBe(200);
    expect(returning.json).toMatchObject({ status: "succeeded", pending_action: "return" });
    const returned = await m.waitForEvent("charge.returned", charge.json.id);
    expect(returned.data.object).toMatchObject({ status: "returned", pending_action: null });
    // On chain: the customer has the 10 back, moved from the escrow by the return.
    const returnHash = (returned.data.object.ended_onchain as { transaction_hash: string }).transaction_hash;
    expect(await moved(returnHash, chain.escrow, customer)).toBe(usd("10"));
    expect((await chain.balanceOf(customer)) - customerBefore).toBe(usd("10"));
    expect(await chain.balanceOf(customer)).toBe(usd("100"));
    const twice = await m.call(`/v1/charges/${charge.json.id}/return`, {});
    expect(expectErrorShape(twice.json).code).toBe("charge_not_returnable");
  });

  it("maps a charge that reverts on chain after simulation (a race) to the same failure code", async () => {
    const m = await merchant();
    const mandate = await openMandate(m);
    const funded = await m.call(`/v1/test/mandates/${mandate.id}/fund`, { amount_decimal: "10" });
    await m.call(`/v1/test/mandates/${mandate.id}/authorize`, {});
    const chain = chainDriver(31337);
    await chain.rpc("evm_setAutomine", [false]);
    try {
      const charge = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "10" });
      expect(charge.json.status).toBe("pending");
      // Before the charge is mined, the customer moves the money away (first in the block: higher tip).
      const customer = funded.json.customer_address as `0x${string}`;
      await chain.rpc("anvil_impersonateAccount", [customer]);
      await chain.rpc("anvil_setBalance", [customer, "0xde0b6b3a7640000"]);
      await chain.rpc("eth_sendTransaction", [
        {
          from: customer,
          to: chain.usdc,
          data: `0xa9059cbb${newAddress().slice(2).padStart(64, "0")}${usd("10").toString(16).padStart(64, "0")}`,
          maxPriorityFeePerGas: "0x3b9aca000",
          maxFeePerGas: "0x3b9aca0000",
          gas: "0x30000",
        },
      ]);
      await chain.rpc("evm_mine", []);
      const failed = await m.waitForCharge(charge.json.id, "failed");
      expect(failed).toMatchObject({ failure_code: "insufficient_funds" });
      await m.waitForEvent("mandate.insufficient", mandate.id);
    } finally {
      await chain.rpc("evm_setAutomine", [true]);
    }
  });

  it("settles a charge mined after a period boundary as the chain recorded it (the next period)", async () => {
    const m = await merchant();
    const mandate = await openMandate(m);
    await m.call(`/v1/test/mandates/${mandate.id}/fund`, { amount_decimal: "10" });
    await m.call(`/v1/test/mandates/${mandate.id}/authorize`, {});
    const chain = chainDriver(31337);
    await chain.rpc("evm_setAutomine", [false]);
    try {
      const charge = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "10" });
      expect(charge.json).toMatchObject({ status: "pending", period: 0 });
      await chain.rpc("evm_setNextBlockTimestamp", [periodStart(mandate.anchor as number, 1) + 10]);
      await chain.rpc("evm_mine", []);
      const settled = await m.waitForCharge(charge.json.id, "succeeded");
      expect(settled).toMatchObject({ period: 1, amount_decimal: "10" });
      const all = await m.call(`/v1/mandates/${mandate.id}/charges`);
      expect(all.json.data).toHaveLength(1);
    } finally {
      await chain.rpc("evm_setAutomine", [true]);
    }
  });

  it("keeps charging existing mandates on a chain closed to new ones", async () => {
    const { key } = await newMerchantWithKey("test");
    const payout = newAddress();
    await api("/v1/merchant/chains", { key, body: { chain: 31339, payout_address: payout } });
    const chain = chainDriver(31339);
    const customer = await chain.newCustomer(usd("100"));
    // Signed straight on chain, naming the service's relayer (the stack's key) as operator.
    const operator = privateKeyToAccount(stack().relayerKey).address;
    const { mandateId } = await chain.authorize(customer, { payee: payout, operator });
    await chain.mine(3);
    let mandate: { id: string; status: string } | undefined;
    await waitFor(
      async () => {
        mandate = (await api("/v1/mandates", { key })).json.data[0];
        return mandate?.status === "active";
      },
      { timeoutMs: 20_000, what: "the chain-signed mandate to be recorded" },
    );
    expect(mandate).toMatchObject({ origin: "chain", onchain_id: mandateId, chain: 31339 });
    const charge = await api(`/v1/mandates/${mandate?.id}/charges`, { key, body: { amount_decimal: "5" } });
    expect(charge.json, charge.text).toMatchObject({ status: "pending" });
  });

  it("hides the test helpers from live keys", async () => {
    const { key } = await newMerchantWithKey("live");
    for (const path of [
      "/v1/test/mandates/mdt_x/fund",
      "/v1/test/mandates/mdt_x/authorize",
      "/v1/test/clock/advance",
    ]) {
      const response = await api(path, { key, body: {} });
      expect(response.status).toBe(404);
      expect(expectErrorShape(response.json).code).toBe("route_not_found");
    }
  });
});
