/**
 * Chain truth to events, end to end: the escrow's logs are indexed by Ponder through the ledger, and
 * the relay turns each confirmed fact into exactly one event in the outbox, also across reorgs.
 */
import { describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import { query, stack } from "./helpers.ts";
import { relaySettled, workerPassed } from "./settle.ts";

interface EventRow {
  id: string;
  type: string;
  merchant_id: string;
  fact_key: string;
  payload: { id: string; type: string; livemode: boolean; data: { object: Record<string, unknown> } };
}

/** The events about an on-chain mandate: about its API mandate object or one of its charges. */
const eventsFor = (mandateId: string) =>
  query<EventRow>(
    `SELECT id, type, merchant_id, fact_key, payload FROM billing.events
     WHERE payload->'data'->'object'->>'id' IN (
       SELECT id FROM billing.mandates WHERE onchain_id = $1
       UNION SELECT c.id FROM billing.charges c JOIN billing.mandates m ON m.id = c.mandate_id WHERE m.onchain_id = $1)
     ORDER BY block_number, log_index`,
    [mandateId],
  );

/**
 * Waits until the indexer has seen a transaction's logs. A reorg issued while Ponder is still fetching
 * the logs of the block it replaces leaves Ponder retrying `eth_getLogs` on a block hash that no longer
 * exists (Ponder 0.17.7); real reorgs come seconds after the block, so the tests reorg after indexing.
 */
const waitForIndexed = (txHash: string) =>
  waitFor(async () => (await query("SELECT 1 FROM onchain.fact WHERE tx_hash = $1", [txHash])).length > 0, {
    timeoutMs: 15_000,
    what: `the indexer to see ${txHash}`,
    intervalMs: 25,
  });

const waitForEvents = async (mandateId: string, count: number) => {
  await waitFor(async () => (await eventsFor(mandateId)).length >= count, {
    timeoutMs: 15_000,
    what: `${count} events for ${mandateId}`,
    intervalMs: 50,
  });
  return eventsFor(mandateId);
};

describe("facts to events", () => {
  it("reports an authorization and a charge once each, for the merchant that owns the payee", async () => {
    const chain = chainDriver(31337);
    const customer = await chain.newCustomer();
    const { mandateId } = await chain.authorize(customer);
    const charged = await chain.charge(mandateId, usd("12.5"));
    const events = await waitForEvents(mandateId, 2);
    expect(events.map((e) => e.type)).toEqual(["mandate.authorized", "charge.succeeded"]);
    for (const event of events) {
      expect(event.merchant_id).toBe(stack().merchantId);
      expect(event.id).toMatch(/^evt_[0-9A-Z]{26}$/);
      expect(event.payload).toMatchObject({ id: event.id, type: event.type, livemode: false });
    }
    expect(events[1]?.payload.data.object).toMatchObject({
      object: "charge",
      amount: "12500000",
      amount_decimal: "12.5",
      status: "succeeded",
      held: false,
      period: 0,
      chain: 31337,
      onchain: { transaction_hash: charged.hash },
    });
    // Nothing more arrives: each fact was relayed once although the relay kept reading the chain after them.
    await relaySettled(31337);
    expect(await eventsFor(mandateId)).toHaveLength(2);
  });

  it("reports a held charge, then its release; and another, then its return", async () => {
    const chain = chainDriver(31337);
    const customer = await chain.newCustomer();
    const { mandateId } = await chain.authorize(customer, { holdSeconds: 600 });
    await chain.charge(mandateId, usd("5"));
    await chain.returnCharge(mandateId, 0);
    await chain.increaseTime(32 * 86_400);
    await chain.mine();
    await chain.charge(mandateId, usd("7"));
    await chain.increaseTime(601);
    await chain.release(mandateId, 1);
    const events = await waitForEvents(mandateId, 5);
    expect(events.map((e) => `${e.type}:${e.payload.data.object.status ?? ""}`)).toEqual([
      "mandate.authorized:active",
      "charge.succeeded:succeeded",
      "charge.returned:returned",
      "charge.succeeded:succeeded",
      "charge.released:released",
    ]);
  });

  it("waits for the chain's confirmations before reporting", async () => {
    const chain = chainDriver(31339); // 2 confirmations
    const customer = await chain.newCustomer();
    const { mandateId } = await chain.authorize(customer);
    const charged = await chain.charge(mandateId, usd("1"));
    await waitForIndexed(charged.hash);
    await chain.mine();
    expect(await chain.client.getBlockNumber()).toBe(charged.receipt.blockNumber + 1n);
    // The authorization is 2 blocks deep, the charge 1, both indexed. Once the authorization is reported
    // (which the relay does only from a head past the charge's block) and the relay has made a whole pass
    // since, it has had the indexed charge before it and held it back.
    await waitForEvents(mandateId, 1);
    await workerPassed("fact-relay");
    expect((await eventsFor(mandateId)).map((e) => e.type)).toEqual(["mandate.authorized"]);
    await chain.mine();
    expect((await waitForEvents(mandateId, 2)).map((e) => e.type)).toEqual([
      "mandate.authorized",
      "charge.succeeded",
    ]);
  });
});

/** On the 2-confirmation chain: a reported authorization, then a charge seen by the indexer only. */
const chargeSeenNotReported = async () => {
  const chain = chainDriver(31339);
  const customer = await chain.newCustomer();
  const { mandateId } = await chain.authorize(customer);
  await chain.mine(2);
  await waitForEvents(mandateId, 1);
  const charged = await chain.charge(mandateId, usd("3"));
  await waitForIndexed(charged.hash);
  return { chain, mandateId, charged };
};

describe("reorgs", () => {
  it("a charge reorged out and mined again yields exactly one charge.succeeded", async () => {
    const { chain, mandateId, charged } = await chargeSeenNotReported();
    await chain.reorg(1, [await chain.distinctTransaction(), charged.raw]);
    await chain.mine(3);
    const events = await waitForEvents(mandateId, 2);
    await relaySettled(31339);
    expect((await eventsFor(mandateId)).map((e) => e.type)).toEqual([
      "mandate.authorized",
      "charge.succeeded",
    ]);
    const receipt = await chain.client.getTransactionReceipt({ hash: charged.hash });
    expect(events[1]?.payload.data.object).toMatchObject({
      onchain: { transaction_hash: charged.hash, block_hash: receipt.blockHash },
    });
    expect(receipt.blockHash).not.toBe(charged.receipt.blockHash);
  });

  it("a charge dropped for good, within the confirmations, yields no event", async () => {
    const { chain, mandateId } = await chargeSeenNotReported();
    await chain.reorg(1, []);
    await chain.mine(3);
    await relaySettled(31339);
    expect((await eventsFor(mandateId)).map((e) => e.type)).toEqual(["mandate.authorized"]);
    const charges = await query("SELECT * FROM onchain.charge WHERE mandate_id = $1", [mandateId]);
    expect(charges).toEqual([]);
  });

  it("with 0 confirmations, a charge reported and then re-mined elsewhere stays one event (same id)", async () => {
    const chain = chainDriver(31337);
    const customer = await chain.newCustomer();
    const { mandateId } = await chain.authorize(customer);
    const charged = await chain.charge(mandateId, usd("2"));
    const [, first] = await waitForEvents(mandateId, 2);
    await chain.reorg(1, [await chain.distinctTransaction(), charged.raw]);
    await chain.mine(1);
    await relaySettled(31337);
    const events = await eventsFor(mandateId);
    expect(events.map((e) => e.type)).toEqual(["mandate.authorized", "charge.succeeded"]);
    expect(events[1]?.id).toBe(first?.id);
    const receipt = await chain.client.getTransactionReceipt({ hash: charged.hash });
    expect(receipt.blockHash).not.toBe(charged.receipt.blockHash);
  });
});

/** Ponder's indexing-cache counters for a table, by kind of request (prefetch, hit, miss, complete). */
const cacheRequests = async (table: string) => {
  const text = await (
    await fetch(`${stack().ponderUrl}/metrics`, { signal: AbortSignal.timeout(15_000) })
  ).text();
  const counts: Record<string, number> = {};
  for (const match of text.matchAll(
    /^ponder_indexing_cache_requests_total\{table="([^"]+)",type="([^"]+)"\} (\d+)$/gm,
  ))
    if (match[1] === table && match[2] !== undefined) counts[match[2]] = Number(match[3]);
  return counts;
};

describe("the indexer's reads", () => {
  it("loads the mandates of a block's charges before its handlers run, not one query per log", async () => {
    // Ponder learns which rows an event's handler reads from a sample of its events (the profile);
    // patches/ponder+0.17.7.patch lets live events feed it, as backfilled ones do. After two charges
    // in blocks of their own, a third charge's mandate comes from the block's prefetch.
    const chain = chainDriver(31337);
    const customer = await chain.newCustomer();
    const [first, second, third] = [
      (await chain.authorize(customer, { salt: 1n })).mandateId,
      (await chain.authorize(customer, { salt: 2n })).mandateId,
      (await chain.authorize(customer, { salt: 3n })).mandateId,
    ];
    for (const mandateId of [first, second])
      await waitForIndexed((await chain.charge(mandateId, usd("1"))).hash);
    const before = await cacheRequests("mandate");
    await waitForIndexed((await chain.charge(third, usd("1"))).hash);
    const after = await cacheRequests("mandate");
    expect((after.prefetch ?? 0) - (before.prefetch ?? 0)).toBeGreaterThan(0);
    expect(after.miss ?? 0).toBe(before.miss ?? 0);
  });
});
