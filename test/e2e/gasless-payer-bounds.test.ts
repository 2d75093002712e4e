/**
 * Issue 47's first attack on the pay page's gasless transfers, on the real stack: one payer holding B
 * signs an authorization of B for each of 20 payment links and posts them all at once, then sends a
 * plain transfer of its own ahead of the relayer's. Each authorization alone passes every check; across
 * them, the payer's bounds (payments/gasless-payers.ts) let one through: the relayer sends one
 * transaction, which reverts, and pays for nothing more. The payer is then refused for the chain's
 * cooling-off, counted in chain time, and paid through again once it has passed. Meanwhile another
 * merchant's charge is mined as usual. The figures (transactions sent, mined and reverted, gas paid, each
 * merchant's part of the hourly budget) are printed for the issue's closing note.
 */
import { randomUUID } from "node:crypto";
import { encodeFunctionData, erc20Abi, type Hex } from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import { paySession, postAuthorization, signTransferAuthorization } from "./gasless-authorizations.ts";
import { expectErrorShape, merchantOnTestChain, query } from "./helpers.ts";
import { metricValue } from "./settle.ts";

const CHAIN = 31337;
const LINKS = 20;
/** The payer's whole balance, and each payment's amount. */
const BALANCE = usd("5");

let driver: ReturnType<typeof chainDriver>;
let attacked: Awaited<ReturnType<typeof merchantOnTestChain>>;
let other: Awaited<ReturnType<typeof merchantOnTestChain>>;

beforeAll(async () => {
  driver = chainDriver(CHAIN);
  [attacked, other] = await Promise.all([merchantOnTestChain(), merchantOnTestChain()]);
});
afterAll(async () => {
  await driver?.rpc("evm_setAutomine", [true]);
  // The page's request counters of this file's requests: later files start from a clean minute.
  await query("DELETE FROM billing.rate_limits");
});

interface Payment {
  readonly id: string;
  readonly payment_url: string;
  readonly address: Hex;
}

const newPayment = async (): Promise<Payment> => {
  const created = await attacked.call("/v1/payments", { amount_decimal: "5", expires_in: 86_400 });
  expect(created.status, created.text).toBe(200);
  return created.json as Payment;
};

/** A TransferWithAuthorization of what is left to pay, signed as the page's wallet would sign it. */
const signAuthorization = async (signer: PrivateKeyAccount, payment: Payment) =>
  signTransferAuthorization(signer, await paySession(payment.payment_url));

const post = (payment: Payment, body: unknown) => postAuthorization(payment.payment_url, body);

/** The relayer's transactions for these payments' gasless transfers, by status. */
const relayed = (ids: readonly string[]) =>
  query<{ purpose: string; status: string; hashes: string[] }>(
    `SELECT purpose, status, hashes FROM billing.relayer_transactions
      WHERE chain_id = $1 AND action = ANY ($2::text[]) ORDER BY created_at`,
    [CHAIN, ids.map((id) => `pay-gasless:${CHAIN}:${id}`)],
  );

/** What the relayer paid for transactions carrying these objects (gas-costs.ts's shares). */
const gasPaid = async (objectIds: readonly string[]) =>
  BigInt(
    (
      await query<{ wei: string }>(
        "SELECT coalesce(sum(amount_wei), 0)::text AS wei FROM billing.gas_cost_shares WHERE object_id = ANY ($1::text[])",
        [objectIds],
      )
    )[0]?.wei ?? "0",
  );

/** Each merchant's part of the chain's relayer spending in the budget's window (relayer-shares.ts). */
const budgetUsed = async (merchantId: string) =>
  BigInt(
    (
      await query<{ wei: string }>(
        `SELECT coalesce(sum(wei), 0)::text AS wei FROM billing.relayer_merchant_spending
          WHERE chain_id = $1 AND merchant_id = $2 AND minute >= now() - interval '61 minutes'`,
        [CHAIN, merchantId],
      )
    )[0]?.wei ?? "0",
  );

const refusals = (reason: string) =>
  metricValue(`billing_gasless_refusals_total{chain_id="${CHAIN}",reason="${reason}"}`);

describe("one payer, twenty payment links, one balance", () => {
  it("makes the relayer pay for at most one transaction, cools the payer off, and leaves other merchants' charges alone", async () => {
    const payer = privateKeyToAccount(generatePrivateKey());
    await driver.rpc("anvil_setBalance", [payer.address, "0xde0b6b3a7640000"]);
    await driver.mint(payer.address, BALANCE);
    const payments = await Promise.all(Array.from({ length: LINKS }, newPayment));
    const ids = payments.map((p) => p.id);
    const signed = await Promise.all(payments.map((p) => signAuthorization(payer, p)));
    const inFlightBefore = await refusals("in_flight");
    const reservedBefore = await refusals("reserved");

    // All twenty at once, with the chain mining nothing meanwhile; then the payer's own transfer of its
    // whole balance goes ahead of the relayer's by fee, and one block mines both.
    await driver.rpc("evm_setAutomine", [false]);
    let answers: Awaited<ReturnType<typeof post>>[];
    try {
      answers = await Promise.all(payments.map((p, i) => post(p, signed[i])));
      await driver.sendAhead(
        payer,
        driver.usdc,
        encodeFunctionData({
          abi: erc20Abi,
          functionName: "transfer",
          args: ["0x000000000000000000000000000000000000dEaD", BALANCE],
        }),
      );
      await driver.mine();
    } finally {
      await driver.rpc("evm_setAutomine", [true]);
    }

    const accepted = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status !== 200);
    expect(accepted).toHaveLength(1);
    for (const answer of refused) {
      const error = expectErrorShape(answer.json);
      // Under the payer's lock, or already before it: the first transfer reserves the whole balance.
      if (answer.status === 429) {
        expect(error.code).toBe("authorization_in_flight");
        expect(Number(answer.headers.get("retry-after"))).toBeGreaterThan(0);
      } else expect([answer.status, error.code]).toEqual([400, "payer_balance_insufficient"]);
    }
    const inFlight = refused.filter((a) => a.status === 429).length;
    expect((await refusals("in_flight")) - inFlightBefore).toBe(inFlight);
    // A 400 is the reservation's, or the token's own answer to the simulation once the first transfer
    // was in the node's pool.
    expect((await refusals("reserved")) - reservedBefore).toBeLessThanOrEqual(refused.length - inFlight);

    // The one transaction sent reverted (the balance had gone); the relayer paid for it and nothing more.
    await waitFor(async () => (await relayed(ids)).every((t) => t.status !== "pending"), {
      timeoutMs: 30_000,
      intervalMs: 100,
      what: "the relayer's transaction recorded as final",
    });
    const sent = await relayed(ids);
    expect(sent.map((t) => t.status)).toEqual(["reverted"]);
    const receipt = await driver.client.getTransactionReceipt({ hash: sent[0]?.hashes.at(-1) as Hex });
    expect(receipt.status).toBe("reverted");
    const paid = await gasPaid(ids);
    expect(paid).toBe(receipt.gasUsed * receipt.effectiveGasPrice);
    // The attacked merchant's part of the hour's budget: what that one reverted transaction paid.
    const attackBudget = await budgetUsed(attacked.merchantId);
    expect(attackBudget).toBe(paid);

    // Another merchant's charge in the same hour: mined, succeeded.
    const mandate = await other.call("/v1/mandates", {
      cap_decimal: "50",
      period: "month",
      customer: `cus_${randomUUID().slice(0, 8)}`,
    });
    expect(mandate.status, mandate.text).toBe(200);
    const mandateId = mandate.json.id as string;
    expect((await other.call(`/v1/test/mandates/${mandateId}/fund`, { amount_decimal: "30" })).status).toBe(
      200,
    );
    const authorized = await other.call(`/v1/test/mandates/${mandateId}/authorize`, {});
    expect(authorized.status, authorized.text).toBe(200);
    const charged = await other.call(`/v1/mandates/${mandateId}/charges`, { amount_decimal: "12.5" });
    expect(charged.status, charged.text).toBe(200);
    const chargeId = charged.json.id as string;
    await other.waitForEvents("charge.succeeded", 1, (object) => object.id === chargeId);
    const otherBudget = await budgetUsed(other.merchantId);

    // The payer, funded again, is cooling off: refused, with the chain seconds left.
    await driver.mint(payer.address, BALANCE);
    const coolingBefore = await refusals("cooling_off");
    const again = await post(payments[1] as Payment, await signAuthorization(payer, payments[1] as Payment));
    expect(again.status, JSON.stringify(again.json)).toBe(429);
    expect(expectErrorShape(again.json).code).toBe("payer_cooling_off");
    const retryAfter = Number(again.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThan(3_500);
    expect(retryAfter).toBeLessThanOrEqual(3_600);
    expect((await refusals("cooling_off")) - coolingBefore).toBe(1);
    expect(await relayed(ids)).toHaveLength(1);

    // Once the chain's clock has passed the cooling-off, the same payer pays through the page again.
    expect((await attacked.advance(retryAfter + 1)).status).toBe(200);
    const later = payments[2] as Payment;
    const through = await post(later, await signAuthorization(payer, later));
    expect(through.status, JSON.stringify(through.json)).toBe(200);
    await attacked.waitForEvents("payment.paid", 1, (object) => object.id === later.id);
    await waitFor(
      async () => JSON.stringify((await relayed(ids)).map((t) => t.status)) === '["reverted","mined"]',
      { timeoutMs: 30_000, intervalMs: 100, what: "the second transfer recorded as mined" },
    );

    const figures = {
      links: LINKS,
      answers: { accepted: accepted.length, in_flight: inFlight, reserved: refused.length - inFlight },
      relayer_transactions: {
        sent: sent.length,
        mined: sent.filter((t) => t.status === "mined").length,
        reverted: sent.filter((t) => t.status === "reverted").length,
      },
      gas_paid_wei: paid.toString(),
      gas_used: receipt.gasUsed.toString(),
      // Each merchant's part of the hourly budget once the attack was over and the other's charge made
      // (test funding, the signature's authorizeMany and the charge), and at the end of the test (the
      // attacked merchant's includes the payment paid after the cooling-off, and its sweep).
      budget_used_wei: {
        attacked_merchant_after_attack: attackBudget.toString(),
        other_merchant_after_charge: otherBudget.toString(),
        attacked_merchant_at_end: (await budgetUsed(attacked.merchantId)).toString(),
      },
      cooling_off_retry_after_seconds: retryAfter,
    };
    console.log(`gasless payer bounds: ${JSON.stringify(figures)}`);
  });
});
