/**
 * Races on money across two service processes on one database (the stack's and a second one): the same
 * period charged by concurrent requests with different idempotency keys, a held charge and a held payment
 * returned by concurrent requests, and a payment returned again after its first return was mined (its
 * request replayed by its Idempotency-Key, a new request refused while it is under way). Each
 * is counted where money moves: the escrow's logs and the token's balances read with viem, and every
 * transaction the relayer recorded (its calldata decoded, not its name), once the object reached its
 * final state (a positive marker: every request had answered and nothing more could be sent).
 */
import { randomUUID } from "node:crypto";
import { decodeFunctionData, type Hex } from "viem";
import { beforeAll, describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import { type ApiResponse, api, merchantOnTestChain, newAddress, query, stack } from "./helpers.ts";
import { startSecondService } from "./second-service.ts";

type Merchant = Awaited<ReturnType<typeof merchantOnTestChain>>;
// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON bodies
type Json = any;

const CONCURRENT = 8;
let processes: string[] = [];

beforeAll(async () => {
  processes = [stack().apiUrl, await startSecondService({ RELAYER_PRIVATE_KEY: stack().relayerKey })];
});

/** `CONCURRENT` requests at once, alternating between the two processes, each with its own key. */
const race = (m: Merchant, path: string, body: unknown) =>
  Promise.all(
    Array.from({ length: CONCURRENT }, (_, i) =>
      api(path, { key: m.key, body, baseUrl: processes[i % processes.length] }),
    ),
  );

/** One 200 and every other answer the 400 with `code`. */
const expectOneWinner = (answers: readonly ApiResponse[], code: string) => {
  const won = answers.filter((a) => a.status === 200);
  expect(won, answers.map((a) => a.text).join("\n")).toHaveLength(1);
  for (const lost of answers.filter((a) => a.status !== 200)) {
    expect(lost.status, lost.text).toBe(400);
    expect(lost.json.error.code).toBe(code);
  }
  return (won[0] as ApiResponse).json as Json;
};

const waitForObject = async (m: Merchant, path: string, done: (o: Json) => boolean, what: string) => {
  let object: Json;
  await waitFor(
    async () => {
      object = (await m.call(path)).json;
      return done(object);
    },
    { timeoutMs: 30_000, intervalMs: 100, what },
  );
  return object;
};

/**
 * The escrow calls the relayer ever recorded that name `id` (a mandate's or a payment's bytes32), by
 * function: read from their calldata, so a transaction sent under any purpose counts.
 */
const relayedCalls = async (id: Hex) => {
  const rows = await query<{ data: Hex; status: string }>(
    "SELECT data, status FROM billing.relayer_transactions WHERE chain_id = 31337 AND position($1 in lower(data)) > 0",
    [id.slice(2).toLowerCase()],
  );
  return rows.map((row) => ({
    fn: decodeFunctionData({ abi: MandateEscrowAbi, data: row.data }).functionName,
    status: row.status,
  }));
};
/** How many transactions calling `fn` the relayer recorded for `id`; none of them may have reverted. */
const callsOf = async (id: Hex, fn: string) => {
  const calls = (await relayedCalls(id)).filter((c) => c.fn === fn);
  expect(calls.filter((c) => c.status === "reverted" || c.status === "superseded")).toEqual([]);
  return calls.length;
};

/** The amounts of the escrow's `event` logs naming `id` (a mandate's or, for payment events, a payment's). */
const loggedAmounts = async (
  event: "Charged" | "Returned" | "PaymentReturned" | "PaymentReleased",
  id: Hex,
) => {
  const chain = chainDriver(31337);
  const logs = await chain.client.getContractEvents({
    address: chain.escrow,
    abi: MandateEscrowAbi,
    eventName: event,
    args: (event.startsWith("Payment") ? { paymentId: id } : { mandateId: id }) as never,
    fromBlock: 0n,
    toBlock: "latest",
  });
  return logs.map((log) => (log.args as { amount: bigint }).amount);
};

/** A mandate of the merchant's, signed by its test wallet and funded: chargeable now. */
const chargeableMandate = async (m: Merchant) => {
  const created = await m.call("/v1/mandates", { cap_decimal: "10", period: "month", customer: "cus_race" });
  expect(created.status, created.text).toBe(200);
  const funded = await m.call(`/v1/test/mandates/${created.json.id}/fund`, { amount_decimal: "100" });
  expect(funded.status, funded.text).toBe(200);
  const signed = await m.call(`/v1/test/mandates/${created.json.id}/authorize`, {});
  expect(signed.status, signed.text).toBe(200);
  return signed.json as { id: string; onchain_id: Hex; customer_address: Hex };
};

describe("races on money across two service processes", () => {
  it("charges a period once when charges with different keys race: one 200, one Charged log, one transaction", async () => {
    const m = await merchantOnTestChain();
    const mandate = await chargeableMandate(m);

    const answers = await race(m, `/v1/mandates/${mandate.id}/charges`, { amount_decimal: "4" });
    const charge = expectOneWinner(answers, "period_already_charged");
    expect(charge.status).toBe("pending");
    // The one charge reached the chain and came back through the indexer: nothing else is on its way.
    await waitForObject(m, `/v1/charges/${charge.id}`, (c) => c.status === "succeeded", "the charge");

    expect(await loggedAmounts("Charged", mandate.onchain_id)).toEqual([usd("4")]);
    expect(await callsOf(mandate.onchain_id, "charge")).toBe(1);
    expect(await callsOf(mandate.onchain_id, "chargeMany")).toBe(0);
    const recorded = await query<{ id: string }>("SELECT id FROM billing.charges WHERE mandate_id = $1", [
      mandate.id,
    ]);
    expect(recorded.map((r) => r.id)).toEqual([charge.id]);
    const events = await m.waitForEvents("charge.succeeded", 1, (o) => o.id === charge.id);
    expect(events).toHaveLength(1);
  });

  it("returns a held charge once when returns with different keys race: one transaction, the money back once", async () => {
    const m = await merchantOnTestChain();
    const mandate = await chargeableMandate(m);
    const chain = chainDriver(31337);
    const charged = await m.call(`/v1/mandates/${mandate.id}/charges`, { amount_decimal: "7" });
    expect(charged.status, charged.text).toBe(200);
    const held = await waitForObject(
      m,
      `/v1/charges/${charged.json.id}`,
      (c) => c.status === "succeeded",
      "the charge to succeed",
    );
    expect(held.held).toBe(true);
    const before = await chain.balanceOf(mandate.customer_address);

    const answers = await race(m, `/v1/charges/${held.id}/return`, {});
    expect(expectOneWinner(answers, "charge_not_returnable")).toMatchObject({ pending_action: "return" });
    const returned = await waitForObject(
      m,
      `/v1/charges/${held.id}`,
      (c) => c.status === "returned",
      "the charge to be returned",
    );
    expect(returned.pending_action).toBeNull();

    expect((await chain.balanceOf(mandate.customer_address)) - before).toBe(usd("7"));
    const [amount] = await chain.client.readContract({
      address: chain.escrow,
      abi: MandateEscrowAbi,
      functionName: "holdOf",
      args: [mandate.onchain_id, held.period],
    });
    expect(amount).toBe(0n);
    expect(await loggedAmounts("Returned", mandate.onchain_id)).toEqual([usd("7")]);
    expect(await callsOf(mandate.onchain_id, "returnCharge")).toBe(1);
    expect(await m.waitForEvents("charge.returned", 1, (o) => o.id === held.id)).toHaveLength(1);
  });

  describe("payments", () => {
    const createPayment = async (m: Merchant, amount: string) => {
      const created = await m.call("/v1/payments", { amount_decimal: amount });
      expect(created.status, created.text).toBe(200);
      const [row] = await query<{ onchain_id: Hex }>(
        "SELECT onchain_id FROM billing.payments WHERE id = $1",
        [created.json.id],
      );
      return { ...(created.json as Json), onchainId: row?.onchain_id as Hex };
    };
    const pay = async (m: Merchant, id: string, amount: string, from: Hex) => {
      const paid = await m.call(`/v1/test/payments/${id}/pay`, { amount_decimal: amount, from });
      expect(paid.status, paid.text).toBe(200);
    };
    const heldAgain = (m: Merchant, id: string, what: string) =>
      waitForObject(m, `/v1/payments/${id}`, (p) => p.status === "paid" && p.held === true, what);
    const reversed = (m: Merchant, id: string, what: string) =>
      waitForObject(
        m,
        `/v1/payments/${id}`,
        (p) => p.status === "reversed" && p.held === false && p.pending_action === null,
        what,
      );
    it("returns a held payment once when returns with different keys race", async () => {
      const m = await merchantOnTestChain();
      const chain = chainDriver(31337);
      const payment = await createPayment(m, "6");
      const payer = newAddress();
      await pay(m, payment.id, "6", payer);
      await heldAgain(m, payment.id, "the payment to be paid and held");
      expect(await chain.balanceOf(payer)).toBe(0n);

      const answers = await race(m, `/v1/payments/${payment.id}/return`, {});
      expect(expectOneWinner(answers, "payment_not_returnable")).toMatchObject({
        pending_action: "return",
        return_to: payer,
      });
      const done = await reversed(m, payment.id, "the payment to be reversed");
      expect(done.amount_received_decimal).toBe("0");

      expect(await chain.balanceOf(payer)).toBe(usd("6"));
      expect(await chain.balanceOf(payment.address)).toBe(0n);
      expect(await loggedAmounts("PaymentReturned", payment.onchainId)).toEqual([usd("6")]);
      expect(await callsOf(payment.onchainId, "returnPayment")).toBe(1);
      expect(await m.waitForEvents("payment.reversed", 1, (o) => o.id === payment.id)).toHaveLength(1);
    });

    it("returns a payment held again after its first return was mined, and releases what is held after that", async () => {
      const m = await merchantOnTestChain();
      const chain = chainDriver(31337);
      const payment = await createPayment(m, "5");
      const payer = newAddress();

      await pay(m, payment.id, "5", payer);
      await heldAgain(m, payment.id, "the first payment to be held");
      const first = await m.call(`/v1/payments/${payment.id}/return`, {});
      expect(first.status, first.text).toBe(200);
      await reversed(m, payment.id, "the first return");
      expect(await chain.balanceOf(payer)).toBe(usd("5"));

      // Paid again later: a new hold, which the first return (mined) must not answer for.
      await pay(m, payment.id, "5", payer);
      await heldAgain(m, payment.id, "the payment to be held again");
      const returnPath = `/v1/payments/${payment.id}/return`;
      const secondKey = randomUUID();
      const second = await api(returnPath, { key: m.key, body: {}, idempotencyKey: secondKey });
      expect(second.status, second.text).toBe(200);
      expect(second.json.pending_action).toBe("return");
      // Its own transaction, committed before the answer.
      expect(await callsOf(payment.onchainId, "returnPayment")).toBe(2);
      // The same request again (its Idempotency-Key, on the other process) is answered as before; a new
      // one is another return, refused while this one is under way (or once nothing is held).
      const replayed = await api(returnPath, {
        key: m.key,
        body: {},
        idempotencyKey: secondKey,
        baseUrl: processes[1] as string,
      });
      expect(replayed.status, replayed.text).toBe(200);
      expect(replayed.headers.get("idempotent-replayed")).toBe("true");
      expect(replayed.json).toEqual(second.json);
      const another = await m.call(returnPath, {});
      expect(another.status, another.text).toBe(400);
      expect(another.json.error.code).toBe("payment_not_returnable");
      expect(await callsOf(payment.onchainId, "returnPayment")).toBe(2);
      await reversed(m, payment.id, "the second return");
      expect(await chain.balanceOf(payer)).toBe(usd("10"));
      expect(await loggedAmounts("PaymentReturned", payment.onchainId)).toEqual([usd("5"), usd("5")]);
      expect(await callsOf(payment.onchainId, "returnPayment")).toBe(2);

      // Held a third time and left alone: released to the merchant once the hold is over.
      await pay(m, payment.id, "5", payer);
      const third = await heldAgain(m, payment.id, "the payment to be held a third time");
      const payout = (await m.call("/v1/merchant/chains")).json.data[0].payout_address as Hex;
      const payoutBefore = await chain.balanceOf(payout);
      const now = Number((await chain.client.getBlock()).timestamp);
      const advanced = await m.advance(third.release_at - now + 10);
      expect(advanced.status, advanced.text).toBe(200);
      const released = await waitForObject(
        m,
        `/v1/payments/${payment.id}`,
        (p) => p.held === false && p.pending_action === null,
        "the third hold to be released",
      );
      expect(released.status).toBe("paid");
      expect((await chain.balanceOf(payout)) - payoutBefore).toBe(usd("5"));
      expect(await loggedAmounts("PaymentReleased", payment.onchainId)).toEqual([usd("5")]);
      expect(await chain.balanceOf(payer)).toBe(usd("10"));
      expect(
        (await m.events("payment.reversed")).filter((e) => e.data.object.id === payment.id),
      ).toHaveLength(2);
    });
  });
});
