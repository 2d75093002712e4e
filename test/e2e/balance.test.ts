/**
 * The merchant's ledger against the chain: balances read with viem from token `Transfer` logs and the
 * escrow's holds, never from our tables; reversals of reorged movements; the backfill of a ledger lost.
 */
import { PgClient } from "@effect/sql-pg";
import { Effect, Redacted } from "effect";
import { erc20Abi, type Hex } from "viem";
import { describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import type { components } from "../../client/openapi.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import { api, expectErrorShape, merchantOnTestChain, newMerchantWithKey, query, stack } from "./helpers.ts";
import { relaySettled, workerPassed } from "./settle.ts";

type Txn = components["schemas"]["BalanceTransaction"];
type BalanceAmount = components["schemas"]["BalanceAmount"];
type Merchant = Awaited<ReturnType<typeof merchantOnTestChain>>;

const listAll = async (m: Merchant, filter = "", limit = 3) => {
  const all: Txn[] = [];
  let after = "";
  for (;;) {
    const page = await m.call(
      `/v1/balance_transactions?limit=${limit}${filter}${after ? `&starting_after=${after}` : ""}`,
    );
    expect(page.status, page.text).toBe(200);
    all.push(...(page.json.data as Txn[]));
    if (!page.json.has_more) return all;
    after = (page.json.data as Txn[]).at(-1)?.id ?? "";
  }
};

const balanceOf = async (m: Merchant, token: Hex): Promise<BalanceAmount | undefined> => {
  const response = await m.call("/v1/balance");
  expect(response.status, response.text).toBe(200);
  return (response.json.amounts as BalanceAmount[]).find(
    (a) => a.chain === 31337 && a.token_address === token.toLowerCase(),
  );
};

const sum = (values: ReadonlyArray<bigint>) => values.reduce((a, b) => a + b, 0n);

describe("the merchant's balance and ledger", () => {
  it("ties out to the chain: available = Transfers into the payout address, pending = the escrow's holds, returned = Transfers back", async () => {
    const m = await merchantOnTestChain();
    const chain = chainDriver(31337);
    const customer = await chain.newCustomer();
    const payee = m.payoutAddress as Hex;
    // Mandates signed on chain to the merchant's payout address (recorded as `origin: "chain"`).
    const held = await chain.authorize(customer, { holdSeconds: 300, payee, salt: 1n });
    const direct = await chain.authorize(customer, { payee, salt: 2n });
    await chain.charge(held.mandateId, usd("1.000001"));
    await chain.charge(direct.mandateId, usd("2.5"));
    await chain.returnCharge(held.mandateId, 0);
    await chain.increaseTime(40 * 86_400);
    await chain.mine();
    await chain.charge(held.mandateId, usd("3"));
    await chain.increaseTime(301);
    await chain.release(held.mandateId, 1);
    await chain.increaseTime(40 * 86_400);
    await chain.mine();
    await chain.charge(held.mandateId, usd("4"));
    // A payment through the API, paid by the test helper and swept by the service.
    const created = await m.call("/v1/payments", { amount_decimal: "5" });
    expect(created.status, created.text).toBe(200);
    const paid = await m.call(`/v1/test/payments/${created.json.id}/pay`, { amount_decimal: "5" });
    expect(paid.status, paid.text).toBe(200);
    await m.waitForEvents("payment.paid", 1, (o) => o.id === created.json.id);
    await relaySettled(31337);

    const txns = await listAll(m);
    const kinds = txns.map((t) => `${t.type}:${t.amount}`).sort();
    expect(kinds).toEqual(
      [
        "charge:1000001",
        "return:-1000001",
        "charge:2500000",
        "charge:3000000",
        "release:3000000",
        "charge:4000000",
        "payment:5000000",
      ].sort(),
    );
    for (const t of txns) {
      expect(sum(t.entries.map((e) => BigInt(e.amount))), t.id).toBe(0n);
      expect(t.reverses).toBeNull();
      expect(t.chain).toBe(31337);
      expect(t.source, t.id).toMatch(t.type.startsWith("payment") ? /^pay_/ : /^ch_/);
      expect(t.available_on).toBeGreaterThanOrEqual(t.created);
    }
    // Newest first by block time, then by when recorded.
    const created_ = txns.map((t) => t.created);
    expect(created_).toEqual([...created_].sort((a, b) => b - a));
    const held4 = txns.find((t) => t.amount === "4000000");
    expect(held4?.balance_effect).toBe("pending");
    expect(held4?.available_on).toBe((held4?.created ?? 0) + 300);
    expect(txns.find((t) => t.amount === "2500000")?.balance_effect).toBe("available");
    expect(txns.find((t) => t.type === "return")?.entries).toEqual([
      { account: "pending", amount: "-1000001" },
      { account: "returned", amount: "1000001" },
    ]);

    // The gas the service paid: the sweep's share on the payment's movement, none on charges the test's
    // own operator sent.
    const swept = txns.find((t) => t.type === "payment");
    let share: { amount_wei: string; native_currency: string } | undefined;
    await waitFor(
      async () => {
        const costs = (await m.call(`/v1/gas_costs?source=${created.json.id}`)).json.data as Array<{
          amount_wei: string;
          native_currency: string;
          transaction: { hash: string };
        }>;
        share = costs.find((c) => c.transaction.hash === swept?.transaction_hash);
        return share !== undefined;
      },
      { timeoutMs: 30_000, what: "the sweep's gas cost" },
    );
    expect((await m.call(`/v1/balance_transactions/${swept?.id}`)).json.gas).toEqual({
      amount_wei: share?.amount_wei,
      currency: share?.native_currency,
    });
    expect(txns.filter((t) => t.type !== "payment").map((t) => t.gas)).toEqual(
      txns.filter((t) => t.type !== "payment").map(() => null),
    );

    // Chain truth, read with viem.
    const intoPayee = await chain.client.getContractEvents({
      address: chain.usdc,
      abi: erc20Abi,
      eventName: "Transfer",
      args: { to: payee },
      fromBlock: 0n,
    });
    const backToCustomer = await chain.client.getContractEvents({
      address: chain.usdc,
      abi: erc20Abi,
      eventName: "Transfer",
      args: { from: chain.escrow, to: customer.address },
      fromBlock: 0n,
    });
    const [terms] = await query<{
      onchain_id: Hex;
      payee_address: Hex;
      token_address: Hex;
      operator_address: Hex;
      hold_seconds: string;
    }>(
      "SELECT onchain_id, payee_address, token_address, operator_address, hold_seconds::text FROM billing.payments WHERE id = $1",
      [created.json.id],
    );
    if (terms === undefined) throw new Error("the payment's terms are not recorded");
    const [paymentHeld] = await chain.client.readContract({
      address: chain.escrow,
      abi: MandateEscrowAbi,
      functionName: "paymentHoldOf",
      args: [
        {
          paymentId: terms.onchain_id,
          payee: terms.payee_address,
          token: terms.token_address,
          operator: terms.operator_address,
          holdSeconds: BigInt(terms.hold_seconds),
        },
      ],
    });
    const holds = await Promise.all(
      [0, 1, 2].map((period) =>
        chain.client.readContract({
          address: chain.escrow,
          abi: MandateEscrowAbi,
          functionName: "holdOf",
          args: [held.mandateId, period],
        }),
      ),
    );
    const onChain = {
      available: sum(intoPayee.map((log) => log.args.value ?? 0n)),
      pending: sum(holds.map(([amount]) => amount)) + paymentHeld,
      returned: sum(backToCustomer.map((log) => log.args.value ?? 0n)),
    };
    expect(onChain.returned).toBe(usd("1.000001"));
    expect(onChain.available).toBeGreaterThanOrEqual(usd("5.5"));
    const balance = await balanceOf(m, chain.usdc);
    expect(balance).toMatchObject({
      available: onChain.available.toString(),
      pending: onChain.pending.toString(),
      returned: onChain.returned.toString(),
    });

    // Filters, paging and one object.
    const returns = await listAll(m, "&type=return");
    expect(returns.map((t) => t.amount)).toEqual(["-1000001"]);
    const ofPayment = await listAll(m, `&source=${created.json.id}`);
    expect(ofPayment.map((t) => t.type)).toEqual(
      ofPayment.length === 1 ? ["payment"] : ["payment_release", "payment"],
    );
    // Read again: the sweep's gas is on it now (a receipt is recorded after the movement, at times).
    const first = (await listAll(m))[0];
    if (first === undefined) throw new Error("no balance transaction");
    const one = await m.call(`/v1/balance_transactions/${first.id}`);
    expect(one.json).toEqual(first);
    const window = await listAll(m, `&created_from=${first.created}&created_to=${first.created + 1}`);
    expect(window.map((t) => t.id)).toContain(first.id);
    expect(window.every((t) => t.created === first.created)).toBe(true);

    // Nobody else's: another merchant sees nothing, not even by id.
    const stranger = await newMerchantWithKey();
    expect((await api("/v1/balance_transactions", { key: stranger.key })).json.data).toEqual([]);
    expect((await api("/v1/balance", { key: stranger.key })).json.amounts).toEqual([]);
    const foreign = await api(`/v1/balance_transactions/${first.id}`, { key: stranger.key });
    expect(foreign.status).toBe(404);
    expect(expectErrorShape(foreign.json).code).toBe("resource_missing");
    for (const [q, param] of [
      ["created_from=10&created_to=5", "created_to"],
      ["available_on_from=10&available_on_to=5", "available_on_to"],
      ["type=refund", "type"],
      ["token=0x12", "token"],
      ["chain=-1", "chain"],
      ["limit=101", "limit"],
    ]) {
      const response = await m.call(`/v1/balance_transactions?${q}`);
      expect(response.status, q).toBe(400);
      expect(expectErrorShape(response.json).param, q).toBe(param);
    }

    // Postgres keeps the double entry: a transaction whose entries do not sum to zero does not commit.
    const unbalanced = await Effect.runPromise(
      Effect.gen(function* () {
        const sql = yield* PgClient.PgClient;
        yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`INSERT INTO billing.balance_transactions (id, merchant_id, livemode, chain_id, token_address,
                currency, decimals, type, balance_effect, amount, fact_key, block_number, block_hash, tx_hash,
                log_index, created, available_on)
              VALUES ('txn_unbalanced', ${m.merchantId}, false, 31337, '0x0', 'USDC', 6, 'charge', 'pending', 1,
                'unbalanced', 1, '0x0', '0x0', 0, 1, 1)`;
            yield* sql`INSERT INTO billing.ledger_entries VALUES ('txn_unbalanced', 'customer', -1),
              ('txn_unbalanced', 'pending', 2)`;
          }),
        );
      }).pipe(
        Effect.provide(PgClient.layer({ url: Redacted.make(stack().databaseUrl), maxConnections: 1 })),
        Effect.match({
          onSuccess: () => "committed",
          // The driver's error wraps Postgres' own message in its causes.
          onFailure: (error) => {
            const messages: string[] = [];
            for (let at: unknown = error; at instanceof Object; at = (at as { cause?: unknown }).cause)
              messages.push(String((at as { message?: unknown }).message ?? at));
            return messages.join(" / ");
          },
        }),
      ),
    );
    expect(unbalanced).toContain("do not balance");
    expect(await query("SELECT 1 FROM billing.balance_transactions WHERE id = 'txn_unbalanced'")).toEqual([]);

    // Months in a time zone, daylight saving time included; unknown zones and months refused.
    const march = await m.call("/v1/reports/period?month=2026-03&time_zone=America/New_York");
    expect(march.status, march.text).toBe(200);
    expect(march.json).toMatchObject({
      object: "period_report",
      period_start: Date.UTC(2026, 2, 1, 5) / 1000,
      period_end: Date.UTC(2026, 3, 1, 4) / 1000,
      balances: [],
    });
    for (const [q, param] of [
      ["month=2026-13", "month"],
      ["", "month"],
      ["month=2026-11&time_zone=Mars/Olympus", "time_zone"],
      ["month=2026-11&time_zone=UTC%2B3", "time_zone"],
    ]) {
      const response = await m.call(`/v1/reports/period?${q}`);
      expect(response.status, q).toBe(400);
      expect(expectErrorShape(response.json).param, q).toBe(param);
    }

    // A closed range downloads the same bytes every time, also after later movements.
    const end = Math.max(...txns.map((t) => t.created)) + 1;
    const closed = async (format: string) => {
      const response = await m.call(`/v1/balance_transactions?format=${format}&created_to=${end}`);
      expect(response.status).toBe(200);
      return response.text;
    };
    const [csvBefore, jsonBefore] = [await closed("csv"), await closed("json")];
    expect(csvBefore.split("\r\n")).toHaveLength(txns.length + 2);
    expect((JSON.parse(jsonBefore) as Txn[]).map((t) => t.id)).toEqual(txns.map((t) => t.id).reverse());
    await chain.increaseTime(60);
    const later = await chain.charge(direct.mandateId, usd("1.5"));
    await waitFor(async () => (await listAll(m, "", 100)).some((t) => t.transaction_hash === later.hash), {
      timeoutMs: 30_000,
      what: "a later charge in the ledger",
    });
    expect(await closed("csv")).toBe(csvBefore);
    expect(await closed("json")).toBe(jsonBefore);

    // A ledger lost (or a deployment older than it) is replayed from the relayed facts, the same.
    const lost = await listAll(m, "", 100);
    const balanceLost = await balanceOf(m, chain.usdc);
    await query(
      `DELETE FROM billing.ledger_entries e USING billing.balance_transactions t
       WHERE t.id = e.balance_transaction_id AND t.merchant_id = $1`,
      [m.merchantId],
    );
    await query("DELETE FROM billing.balance_transactions WHERE merchant_id = $1", [m.merchantId]);
    expect(await listAll(m)).toEqual([]);
    await query("DELETE FROM billing.ledger_backfills WHERE chain_id = 31337");
    await waitFor(
      async () =>
        (await query("SELECT 1 FROM billing.ledger_backfills WHERE chain_id = 31337 AND done_at IS NOT NULL"))
          .length > 0,
      { timeoutMs: 60_000, what: "the ledger backfill of chain 31337" },
    );
    const replayed = await listAll(m, "", 100);
    expect(lost).toHaveLength(txns.length + 1);
    expect(replayed.map((t) => `${t.type}:${t.amount}:${t.transaction_hash}:${t.source}`).sort()).toEqual(
      lost.map((t) => `${t.type}:${t.amount}:${t.transaction_hash}:${t.source}`).sort(),
    );
    expect(await balanceOf(m, chain.usdc)).toEqual(balanceLost);
  });

  it("takes back a movement a reorg moved or removed with a reversal, never a deletion", async () => {
    const m = await merchantOnTestChain();
    const chain = chainDriver(31337);
    const customer = await chain.newCustomer();
    const mandate = await chain.authorize(customer, {
      holdSeconds: 3600,
      payee: m.payoutAddress as Hex,
      salt: 3n,
    });
    const charged = await chain.charge(mandate.mandateId, usd("7"));
    const recorded = async () =>
      (await listAll(m, "", 100)).filter((t) => t.transaction_hash === charged.hash);
    await waitFor(async () => (await recorded()).length === 1, {
      timeoutMs: 30_000,
      what: "the charge in the ledger",
    });
    const [original] = await recorded();
    expect((await balanceOf(m, chain.usdc))?.pending).toBe("7000000");

    // Mined again in another block: reversed where it was, recorded where it is.
    const head = await chain.client.getBlockNumber();
    await chain.reorg(Number(head - charged.receipt.blockNumber) + 1, [
      await chain.distinctTransaction(),
      charged.raw,
    ]);
    await chain.mine(1);
    await waitFor(async () => (await recorded()).length === 3, {
      timeoutMs: 30_000,
      what: "the reversal and the charge at its new place",
    });
    const moved = await recorded();
    const reversal = moved.find((t) => t.reverses !== null);
    const again = moved.find((t) => t.reverses === null && t.id !== original?.id);
    expect(reversal).toMatchObject({ reverses: original?.id, amount: "-7000000", type: "charge" });
    expect(reversal?.entries).toEqual([
      { account: "pending", amount: "-7000000" },
      { account: "customer", amount: "7000000" },
    ]);
    expect(again?.amount).toBe("7000000");
    expect(again?.block.hash).not.toBe(original?.block.hash);
    expect(moved.find((t) => t.id === original?.id)).toEqual(original);
    expect((await balanceOf(m, chain.usdc))?.pending).toBe("7000000");

    // Removed for good: the movement recorded again is reversed too, and pending is back to nothing.
    const now = await chain.client.getBlockNumber();
    const [fact] = await query<{ block_number: string }>(
      "SELECT block_number::text FROM onchain.fact WHERE tx_hash = $1",
      [charged.hash],
    );
    await chain.reorg(Number(now - BigInt(fact?.block_number ?? now)) + 1, [
      await chain.distinctTransaction(),
    ]);
    await chain.mine(1);
    await waitFor(async () => (await recorded()).length === 4, {
      timeoutMs: 30_000,
      what: "the reversal of the charge removed",
    });
    await workerPassed("ledger-reorgs");
    const final = await recorded();
    expect(final).toHaveLength(4);
    expect(sum(final.map((t) => BigInt(t.amount)))).toBe(0n);
    expect(
      final
        .filter((t) => t.reverses !== null)
        .map((t) => t.reverses)
        .sort(),
    ).toEqual(
      final
        .filter((t) => t.reverses === null)
        .map((t) => t.id)
        .sort(),
    );
    expect((await balanceOf(m, chain.usdc))?.pending).toBe("0");
  });
});
