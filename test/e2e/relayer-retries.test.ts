/**
 * Transactions that pass the simulation and then revert on chain (the chain changed before they were
 * mined: anvil's automine is turned off, a conflicting transaction or a clock move goes first, then a
 * block is mined), and their retries, which must each send a new transaction and succeed: a charge, a
 * return and an authorization. Then the gas a holder of an authorization link can make the relayer
 * spend: many valid re-signatures pay for at most the per-mandate limit of transactions, and the
 * page's routes answer 429 beyond their per-token and per-address limits. Last, authorisations sent
 * together: several customers' in one authorizeMany, and an item the escrow skips failing alone.
 */
import { randomUUID } from "node:crypto";
import { Agent, fetch } from "undici";
import {
  encodeFunctionData,
  erc20Abi,
  type Hex,
  type PrivateKeyAccount,
  parseEventLogs,
  parseSignature,
  type TransactionReceipt,
  toFunctionSelector,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { usdcAbi } from "../../scripts/stack/circle-usdc.ts";
import { LOCAL_USDC_ADMIN_KEY } from "../../scripts/stack/local-chain.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import { GROUPS_IN_FLIGHT } from "../../service/chains/relayer.ts";
import { PERMIT_TYPES } from "../../service/mandates/terms.ts";
import { type PageTypedData, signPageTerms } from "../contract/harness.ts";
import { chainDriver, faucet, usd } from "./chain-driver.ts";
import { api, expectErrorShape, merchantOnTestChain, query, stack, withinOneMinute } from "./helpers.ts";
import { holdLock } from "./lock-holder.ts";
import { metricValue } from "./settle.ts";

const CHAIN = 31337;
/** The stack's relayer account, which pays for every escrow transaction the service sends. */
const relayer = privateKeyToAccount(stack().relayerKey);
let driver: ReturnType<typeof chainDriver>;
let merchant: Awaited<ReturnType<typeof merchantOnTestChain>>;

beforeAll(async () => {
  driver = chainDriver(CHAIN);
  merchant = await merchantOnTestChain();
});
afterAll(async () => {
  await driver?.rpc("evm_setAutomine", [true]);
  // The page's request counters of this file's requests: later files start from a clean minute.
  await query("DELETE FROM billing.rate_limits");
});

const tokenOf = (mandate: { authorization_url: string }) =>
  mandate.authorization_url.split("/authorize/")[1] ?? "";

/** The terms (and the permit) the page asks the wallet to sign. */
const termsFor = async (token: string, customer: PrivateKeyAccount) => {
  const request = await api(`/authorize/${token}/terms`, {
    key: null,
    idempotencyKey: null,
    body: { customer_address: customer.address },
  });
  if (request.status !== 200) throw new Error(`terms: ${request.text}`);
  return request.json as { terms: PageTypedData; permit: PageTypedData | null };
};

/** What the hosted page does: fetch the terms, sign them (and the permit) with the wallet, submit. */
const signAndSubmit = async (token: string, customer: PrivateKeyAccount) => {
  const { terms, permit } = await termsFor(token, customer);
  return { terms, ...(await submitSigned(token, customer, terms, permit)) };
};

/** Signs terms (and a permit) and submits the signatures `copies` times at once. */
const submitSigned = async (
  token: string,
  customer: PrivateKeyAccount,
  terms: PageTypedData,
  permit: PageTypedData | null,
  copies = 1,
) => {
  const body = await signPageTerms(customer, terms, permit);
  const answers = await Promise.all(
    Array.from({ length: copies }, () =>
      api(`/authorize/${token}/signatures`, { key: null, idempotencyKey: null, body }),
    ),
  );
  return { nonce: Number(terms.message.nonce), answers };
};

/** The database's clock now, to select what the relayer recorded after it. */
const databaseNow = async () => (await query<{ now: string }>("SELECT now()::text AS now"))[0]?.now ?? "";

/** The authorisations the relayer recorded since `started` (the database's clock). */
const authorizationsSentSince = (started: string) =>
  query(
    `SELECT 1 FROM billing.relayer_transactions
      WHERE chain_id = $1 AND created_at >= $2::timestamptz AND action LIKE 'authorize:%'`,
    [CHAIN, started],
  );

/** Waits until the relayer recorded these outcomes for the transactions a query selects. */
const relayerStatuses = (what: string, text: string, params: unknown[], expected: string[]) =>
  waitUntil(what, async () => {
    const rows = await query<{ status: string }>(text, params);
    return JSON.stringify(rows.map((row) => row.status)) === JSON.stringify(expected);
  });

/** Sends from a customer without waiting for a block (automine may be off), ahead of others by fee. */
const sendAhead = async (account: PrivateKeyAccount, to: Hex, data: Hex) => {
  const nonce = await driver.client.getTransactionCount({ address: account.address, blockTag: "pending" });
  const raw = await account.signTransaction({
    type: "eip1559",
    chainId: CHAIN,
    nonce,
    to,
    data,
    gas: 200_000n,
    maxFeePerGas: 200_000_000_000n,
    maxPriorityFeePerGas: 100_000_000_000n,
  });
  return driver.client.sendRawTransaction({ serializedTransaction: raw });
};

const balanceOf = (address: Hex) => driver.balanceOf(address);

/** Moves the customer's whole token balance away (to the zero-adjacent dead address). */
const emptyWallet = async (customer: PrivateKeyAccount) =>
  sendAhead(
    customer,
    driver.usdc,
    encodeFunctionData({
      abi: erc20Abi,
      functionName: "transfer",
      args: ["0x000000000000000000000000000000000000dEaD", await balanceOf(customer.address)],
    }),
  );

const mint = async (customer: PrivateKeyAccount, amount: bigint) => {
  const hash = await sendAhead(
    faucet,
    driver.usdc,
    encodeFunctionData({ abi: usdcAbi, functionName: "mint", args: [customer.address, amount] }),
  );
  await driver.client.waitForTransactionReceipt({ hash, pollingInterval: 20 });
};

/** The relayer transaction of a purpose, once the node holds its bytes. */
const relayedInPool = async (purpose: string) => {
  let hash: Hex | undefined;
  await waitFor(
    async () => {
      const [row] = await query<{ hashes: string[] }>(
        "SELECT hashes FROM billing.relayer_transactions WHERE chain_id = $1 AND purpose = $2",
        [CHAIN, purpose],
      );
      const last = row?.hashes.at(-1) as Hex | undefined;
      if (last && (await driver.client.request({ method: "eth_getTransactionByHash", params: [last] })))
        hash = last;
      return hash !== undefined;
    },
    { timeoutMs: 10_000, intervalMs: 50, what: `the relayer's transaction for ${purpose}` },
  );
  return hash as Hex;
};

/** The reasons (error selectors) of the items an authorizeMany's receipt says the escrow skipped. */
const skippedIn = (receipt: TransactionReceipt) =>
  parseEventLogs({ abi: MandateEscrowAbi, eventName: "AuthorizationSkipped", logs: receipt.logs }).map(
    (log) => log.args.reason,
  );

const receiptStatus = async (hash: Hex) => (await driver.client.getTransactionReceipt({ hash })).status;

/** Runs `during` with automine off, then mines one block and turns automine back on. */
const withoutAutomine = async <A>(during: () => Promise<A>, beforeMining?: () => Promise<void>) => {
  await driver.rpc("evm_setAutomine", [false]);
  try {
    const result = await during();
    await beforeMining?.();
    await driver.mine();
    return result;
  } finally {
    await driver.rpc("evm_setAutomine", [true]);
  }
};

const mandateOf = async (id: string) => (await merchant.call(`/v1/mandates/${id}`)).json;
const chargeOf = async (id: string) => (await merchant.call(`/v1/charges/${id}`)).json;
const waitUntil = (what: string, check: () => Promise<boolean>) =>
  waitFor(check, { timeoutMs: 30_000, intervalMs: 100, what });

const openMandate = async () => {
  const opened = await merchant.call("/v1/mandates", {
    cap_decimal: "50",
    period: "month",
    customer: `cus_${randomUUID().slice(0, 8)}`,
  });
  expect(opened.status).toBe(200);
  return opened.json as { id: string; authorization_url: string };
};

describe("a transaction that reverts on chain is retried with a new transaction", () => {
  let customer: PrivateKeyAccount;
  let mandateId: string;
  let chargeId: string;

  it("authorization: the signature expires before it is mined; signing again succeeds", async () => {
    customer = await driver.newCustomer();
    const mandate = await openMandate();
    mandateId = mandate.id;
    const token = tokenOf(mandate);
    let firstHash: Hex | undefined;
    await withoutAutomine(
      async () => {
        const { answers } = await signAndSubmit(token, customer);
        expect(answers[0]?.status).toBe(200);
        firstHash = answers[0]?.json.pending_transaction as Hex;
        expect(firstHash).toMatch(/^0x[0-9a-f]{64}$/);
        await waitUntil("the authorization in the pool", async () =>
          Boolean(
            await driver.client.request({ method: "eth_getTransactionByHash", params: [firstHash as Hex] }),
          ),
        );
      },
      // The block that includes it comes after the signature's deadline (an hour and a bit later).
      () => driver.increaseTime(3_700),
    );
    // The authorizeMany that carried it was mined; the escrow skipped this item (SignatureExpired).
    const carrier = await driver.client.getTransactionReceipt({ hash: firstHash as Hex });
    expect(carrier.status).toBe("success");
    expect(skippedIn(carrier)).toEqual([toFunctionSelector("SignatureExpired(uint64)")]);
    // The page offers to sign again once the relayer saw the skipped item.
    await waitUntil("the session to ask for a signature again", async () => {
      const session = await api(`/authorize/${token}/session`, { key: null });
      return session.json.needs_signature === true && session.json.pending_transaction === null;
    });

    const { nonce, answers } = await signAndSubmit(token, customer);
    expect(nonce).toBe(1); // the same signature version: the first attempt never reached the chain
    expect(answers[0]?.status).toBe(200);
    const retryHash = answers[0]?.json.pending_transaction as Hex;
    expect(retryHash).not.toBe(firstHash);
    await waitUntil("the mandate to be active", async () => (await mandateOf(mandateId)).status === "active");
    expect(await receiptStatus(retryHash)).toBe("success");
    const [bound] = await query<{ onchain_id: string }>(
      "SELECT onchain_id FROM billing.mandates WHERE id = $1",
      [mandateId],
    );
    await relayerStatuses(
      "both authorization attempts recorded",
      "SELECT status FROM billing.relayer_transactions WHERE action = $1 ORDER BY created_at",
      [`authorize:${CHAIN}:${bound?.onchain_id.toLowerCase()}:1`],
      ["reverted", "mined"],
    );
  });

  it("charge: the customer empties the wallet before it is mined; a retry in the period succeeds", async () => {
    const first = await withoutAutomine(
      async () => {
        const charged = await merchant.call(`/v1/mandates/${mandateId}/charges`, { amount_decimal: "5" });
        expect(charged.json.status).toBe("pending");
        const [row] = await query<{ relayer_purpose: string }>(
          "SELECT relayer_purpose FROM billing.charges WHERE id = $1",
          [charged.json.id],
        );
        const hash = await relayedInPool(row?.relayer_purpose ?? "");
        return { id: charged.json.id as string, hash };
      },
      async () => {
        await emptyWallet(customer);
      },
    );
    expect(await receiptStatus(first.hash)).toBe("reverted");
    await waitUntil(
      "the reverted charge to fail",
      async () => (await chargeOf(first.id)).status === "failed",
    );
    expect((await chargeOf(first.id)).failure_code).toBe("insufficient_funds");

    await mint(customer, 100_000_000n);
    const idempotencyKey = randomUUID();
    const retried = await api(`/v1/mandates/${mandateId}/charges`, {
      key: merchant.key,
      idempotencyKey,
      body: { amount_decimal: "5" },
    });
    expect(retried.status).toBe(200);
    expect(retried.json.id).not.toBe(first.id);
    await waitUntil(
      "the retried charge to succeed",
      async () => (await chargeOf(retried.json.id)).status === "succeeded",
    );
    chargeId = retried.json.id;

    // The same request replayed sends nothing more.
    const replayed = await api(`/v1/mandates/${mandateId}/charges`, {
      key: merchant.key,
      idempotencyKey,
      body: { amount_decimal: "5" },
    });
    expect(replayed.headers.get("idempotent-replayed")).toBe("true");
    expect(replayed.json.id).toBe(retried.json.id);
    const [{ onchain_id } = { onchain_id: "" }] = await query<{ onchain_id: string }>(
      "SELECT onchain_id FROM billing.charges WHERE id = $1",
      [chargeId],
    );
    await relayerStatuses(
      "both charge attempts recorded",
      "SELECT status FROM billing.relayer_transactions WHERE purpose LIKE $1 ORDER BY created_at",
      [`charge:${CHAIN}:${onchain_id}:%`],
      ["reverted", "mined"],
    );
  });

  it("return: the chain's state changes after the simulation and it reverts; a second return succeeds", async () => {
    const charge = await chargeOf(chargeId);
    expect(charge.held).toBe(true);
    // Nothing a customer can do makes a held return fail (it even pays the gas of refilling an emptied
    // wallet within the relayer's margin), but Circle can: the token's blacklister blocks the customer in
    // the block that mines the return (sent ahead of it by fee), and clears it afterwards.
    const blacklister = privateKeyToAccount(LOCAL_USDC_ADMIN_KEY);
    const firstHash = await withoutAutomine(
      async () => {
        const returned = await merchant.call(`/v1/charges/${chargeId}/return`, {});
        expect(returned.status).toBe(200);
        expect(returned.json.pending_action).toBe("return");
        const [row] = await query<{ pending_action_purpose: string }>(
          "SELECT pending_action_purpose FROM billing.charges WHERE id = $1",
          [chargeId],
        );
        return relayedInPool(row?.pending_action_purpose ?? "");
      },
      async () => {
        await sendAhead(
          blacklister,
          driver.usdc,
          encodeFunctionData({ abi: usdcAbi, functionName: "blacklist", args: [customer.address] }),
        );
      },
    );
    const cleared = await sendAhead(
      blacklister,
      driver.usdc,
      encodeFunctionData({ abi: usdcAbi, functionName: "unBlacklist", args: [customer.address] }),
    );
    await driver.client.waitForTransactionReceipt({ hash: cleared, pollingInterval: 20 });
    expect(await receiptStatus(firstHash)).toBe("reverted");
    await waitUntil(
      "the failed return to be cleared",
      async () => (await chargeOf(chargeId)).pending_action === null,
    );

    const again = await merchant.call(`/v1/charges/${chargeId}/return`, {});
    expect(again.status).toBe(200);
    await waitUntil(
      "the charge to be returned",
      async () => (await chargeOf(chargeId)).status === "returned",
    );
    const [held] = await query<{ onchain_id: string }>(
      "SELECT onchain_id FROM billing.charges WHERE id = $1",
      [chargeId],
    );
    await relayerStatuses(
      "both return attempts recorded",
      "SELECT status FROM billing.relayer_transactions WHERE action = $1 ORDER BY created_at",
      [`return:${CHAIN}:${held?.onchain_id}`],
      ["reverted", "mined"],
    );
  });
});

describe("the relayer's gas, spent through the public page", () => {
  it("many valid re-signatures pay for at most the per-mandate limit of transactions", async () => {
    const LIMIT = 5; // AUTHORIZATIONS_PER_MANDATE_PER_DAY's default
    const customer = await driver.newCustomer();
    const mandate = await openMandate();
    const token = tokenOf(mandate);
    const nonceBefore = await driver.client.getTransactionCount({ address: relayer.address });
    const started = await databaseNow();

    // The first signature through the page; then re-signatures the page would not even ask for (the
    // mandate is active), each valid: the next signature version, a fresh deadline, sent four times at once.
    const first = await signAndSubmit(token, customer);
    expect(first.answers[0]?.status).toBe(200);
    await waitUntil("signature version 1", async () => (await mandateOf(mandate.id)).signature_version === 1);
    let refusal: Awaited<ReturnType<typeof api>> | undefined;
    for (let round = 2; round <= LIMIT + 3; round++) {
      const now = Number((await driver.client.getBlock()).timestamp);
      const terms = {
        domain: first.terms.domain,
        message: { ...first.terms.message, nonce: String(round), deadline: String(now + 3_000) },
      };
      const { nonce, answers } = await submitSigned(token, customer, terms, null, 4);
      if (answers.some((a) => a.status === 200)) {
        await waitUntil(
          `signature version ${nonce}`,
          async () => (await mandateOf(mandate.id)).signature_version === nonce,
        );
      } else {
        refusal = answers.find((a) => a.status === 429);
        if (refusal) break;
      }
    }
    expect(refusal?.status).toBe(429);
    expect(expectErrorShape(refusal?.json).code).toBe("authorization_limit_reached");
    expect(Number(refusal?.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await mandateOf(mandate.id)).signature_version).toBe(LIMIT);

    const paid = await query<{ action: string | null; carrier_id: string | null }>(
      `SELECT action, carrier_id FROM billing.relayer_transactions
        WHERE chain_id = $1 AND created_at >= $2::timestamptz`,
      [CHAIN, started],
    );
    const forMandate = paid.filter((row) => row.action?.startsWith(`authorize:${CHAIN}:`));
    expect(forMandate).toHaveLength(LIMIT);
    // Every transaction the relayer's account sent in the meantime is one of those recorded (the
    // authorisations are items of the authorizeMany transactions that carried them).
    const nonceAfter = await driver.client.getTransactionCount({ address: relayer.address });
    expect(nonceAfter - nonceBefore).toBe(paid.filter((row) => row.carrier_id === null).length);
  });

  it("refuses terms signed by another wallet (signature_invalid) and sends nothing", async () => {
    const customer = await driver.newCustomer();
    const other = await driver.newCustomer();
    const mandate = await openMandate();
    const token = tokenOf(mandate);
    const { terms, permit } = await termsFor(token, customer);
    const started = await databaseNow();
    // The wallet that signed is not the one the terms (and the mandate id) name.
    const body = { ...(await signPageTerms(other, terms, permit)), customer_address: customer.address };
    const answer = await api(`/authorize/${token}/signatures`, { key: null, idempotencyKey: null, body });
    expect(answer.status, answer.text).toBe(400);
    expect(expectErrorShape(answer.json)).toMatchObject({ code: "signature_invalid", param: "signature" });
    expect((await mandateOf(mandate.id)).customer_address).toBeNull();
    expect(await authorizationsSentSince(started)).toHaveLength(0);
  });

  it("refuses terms signed again once the chain has them (terms_changed) and sends nothing", async () => {
    const customer = await driver.newCustomer();
    const mandate = await openMandate();
    const token = tokenOf(mandate);
    const { terms, permit } = await termsFor(token, customer);
    const first = await submitSigned(token, customer, terms, permit);
    expect(first.answers[0]?.status, first.answers[0]?.text).toBe(200);
    await waitUntil("the mandate active", async () => (await mandateOf(mandate.id)).status === "active");
    const started = await databaseNow();
    // The same terms signed again: the escrow's nonce has passed them (the simulation says StaleNonce).
    const again = (await submitSigned(token, customer, terms, permit)).answers[0];
    expect(again?.status, again?.text).toBe(400);
    expect(expectErrorShape(again?.json)).toMatchObject({ code: "terms_changed", param: "terms" });
    expect(await authorizationsSentSince(started)).toHaveLength(0);
  });

  it("answers 429 with Retry-After beyond the per-token request limit", async () => {
    // A fresh token each round: a round that straddled a minute is not judged, and runs again.
    const answers = await withinOneMinute(async () => {
      const token = tokenOf(await openMandate());
      return Promise.all(
        Array.from({ length: 260 }, () => api(`/authorize/${token}/session`, { key: null })),
      );
    });
    const limited = answers.filter((a) => a.status === 429);
    expect(answers.filter((a) => a.status === 200).length).toBeLessThanOrEqual(240);
    expect(limited.length).toBeGreaterThanOrEqual(20);
    const first = limited[0];
    expect(expectErrorShape(first?.json).code).toBe("rate_limited");
    expect(Number(first?.headers.get("retry-after"))).toBeGreaterThan(0);
    // Another token is not limited by this one.
    const other = await openMandate();
    expect((await api(`/authorize/${tokenOf(other)}/session`, { key: null })).status).toBe(200);
  });

  it("answers 429 beyond the per-address request limit, whatever X-Forwarded-For claims", async () => {
    const LIMIT = 600; // PAGE_RATE_LIMIT_PER_ADDRESS's default
    // A loopback address of this test's own (a fresh one each round), so the stack's other clients
    // keep their budget.
    const loopback = () =>
      `127.0.${2 + Math.floor(Math.random() * 250)}.${2 + Math.floor(Math.random() * 250)}`;
    const from = (localAddress: string) => new Agent({ localAddress, connections: 32 });
    const page = (dispatcher: Agent, n: number) =>
      Promise.all(
        Array.from({ length: n }, async (_, i) => {
          // Unknown links, each a different one: only the address's counter can refuse them.
          const response = await fetch(`${stack().apiUrl}/authorize/${"x".repeat(24)}${i}/session`, {
            dispatcher,
            headers: { "x-forwarded-for": `203.0.113.${i % 250}` },
          });
          return {
            status: response.status,
            retryAfter: response.headers.get("retry-after"),
            text: await response.text(),
          };
        }),
      );
    const answers = await withinOneMinute(async () => {
      const hammer = from(loopback());
      try {
        return await page(hammer, LIMIT + 40);
      } finally {
        await hammer.close();
      }
    });
    const limited = answers.filter((a) => a.status === 429);
    expect(answers.filter((a) => a.status === 404).length).toBeLessThanOrEqual(LIMIT);
    expect(limited.length).toBeGreaterThanOrEqual(40);
    expect(expectErrorShape(JSON.parse(limited[0]?.text ?? "null")).code).toBe("rate_limited");
    expect(Number(limited[0]?.retryAfter)).toBeGreaterThan(0);
    // Another client address is not limited by this one.
    const neighbour = from(`127.0.1.${2 + Math.floor(Math.random() * 250)}`);
    try {
      expect((await page(neighbour, 1))[0]?.status).toBe(404);
    } finally {
      await neighbour.close();
    }
  });
});

/**
 * Runs `submit` (which sends `count` authorisations) while the relayer's collector is held, so that what
 * it submits waits and goes out as one group: the test holds the relayer account's lock exclusively (a
 * group's transaction takes it shared); `primers` sent one by one form as many groups as the relayer lets
 * be on their way at once, each seen waiting for the lock in Postgres; the authorisations `submit` sends
 * then wait in the collector (seen in `billing_relayer_authorizations_waiting`), and the lock goes.
 */
const asOneGroup = async <A>(
  primers: Array<() => Promise<unknown>>,
  count: number,
  submit: () => Promise<A>,
) => {
  expect(primers).toHaveLength(GROUPS_IN_FLIGHT);
  const gate = await holdLock("SELECT pg_advisory_xact_lock(hashtext($1))", [
    `relayer:${CHAIN}:${relayer.address.toLowerCase()}`,
  ]);
  const primed: Promise<unknown>[] = [];
  let submitted: Promise<A> | undefined;
  try {
    for (const primer of primers) {
      const sent = primer();
      sent.catch(() => undefined); // awaited below; a failure then fails the test
      primed.push(sent);
      await waitUntil(
        `${primed.length} groups waiting for the relayer's lock`,
        async () => (await gate.waiting()).length >= primed.length,
      );
    }
    submitted = submit();
    submitted.catch(() => undefined); // awaited below
    await waitUntil(
      `${count} authorisations waiting in the collector`,
      async () => (await metricValue(`billing_relayer_authorizations_waiting{chain_id="${CHAIN}"}`)) >= count,
    );
  } finally {
    await gate.release();
  }
  await Promise.all(primed);
  return (await submitted) as A;
};

/** Authorisations of fresh mandates, one per group the relayer lets be on its way at once. */
const primers = async () =>
  Promise.all(
    Array.from({ length: GROUPS_IN_FLIGHT }, async () => {
      const [mandate, customer] = [await openMandate(), await driver.newCustomer()];
      return () => signAndSubmit(tokenOf(mandate), customer);
    }),
  );

/** The relayer's rows of authorisation items of these mandates' first signature, with their carriers' hashes. */
const itemsOf = (mandateIds: string[]) =>
  query<{ mandate_id: string; status: string; carrier_id: string | null; hash: string }>(
    `SELECT m.id AS mandate_id, t.status, t.carrier_id, t.hashes[cardinality(t.hashes)] AS hash
      FROM billing.mandates m JOIN billing.relayer_transactions t
        ON t.chain_id = m.chain_id AND t.action = 'authorize:' || m.chain_id || ':' || lower(m.onchain_id) || ':1'
      WHERE m.id = ANY ($1::text[])`,
    [mandateIds],
  );

describe("authorisations sent together in one authorizeMany", () => {
  it("several customers sign at once and one transaction carries their authorisations", async () => {
    const first = await primers();
    const together = await Promise.all(
      Array.from({ length: 4 }, async () => ({
        mandate: await openMandate(),
        customer: await driver.newCustomer(),
      })),
    );
    const signed = await Promise.all(
      together.map(async ({ mandate, customer }) => {
        const { terms, permit } = await termsFor(tokenOf(mandate), customer);
        return { mandate, customer, terms, permit };
      }),
    );
    const nonceBefore = await driver.client.getTransactionCount({ address: relayer.address });
    const answers = await asOneGroup(first, signed.length, () =>
      Promise.all(
        signed.map(({ mandate, customer, terms, permit }) =>
          submitSigned(tokenOf(mandate), customer, terms, permit),
        ),
      ),
    );
    for (const {
      answers: [answer],
    } of answers)
      expect(answer?.status).toBe(200);
    const hashes = new Set(answers.map(({ answers: [answer] }) => answer?.json.pending_transaction));
    expect(hashes.size).toBe(1);
    const [hash] = [...hashes] as Hex[];
    for (const { mandate } of together)
      await waitUntil(
        "each mandate to be active",
        async () => (await mandateOf(mandate.id)).status === "active",
      );
    expect(await receiptStatus(hash as Hex)).toBe("success");
    const ids = together.map(({ mandate }) => mandate.id);
    await waitUntil("the tracker to record each item mined", async () =>
      (await itemsOf(ids)).every((item) => item.status === "mined"),
    );
    const items = await itemsOf(ids);
    expect(items).toHaveLength(4);
    expect(new Set(items.map((item) => item.carrier_id)).size).toBe(1);
    for (const item of items) expect(item.hash).toBe(hash);
    // One transaction per primer's group, and one for these four.
    const nonceAfter = await driver.client.getTransactionCount({ address: relayer.address });
    expect(nonceAfter - nonceBefore).toBe(GROUPS_IN_FLIGHT + 1);
  });

  it("an item whose permit is used up meanwhile is skipped: only its customer is asked to sign again", async () => {
    const first = await primers();
    const [late, onTime] = [await openMandate(), await openMandate()];
    // Customers who have not approved the escrow: the page asks them for permits.
    const [lateCustomer, onTimeCustomer] = [
      await driver.newCustomer(usd("1000"), { approve: false }),
      await driver.newCustomer(usd("1000"), { approve: false }),
    ];
    const lateTerms = await termsFor(tokenOf(late), lateCustomer);
    const onTimeTerms = await termsFor(tokenOf(onTime), onTimeCustomer);
    const permit = lateTerms.permit;
    if (permit === null) throw new Error("the test token has permits");
    const answers = await withoutAutomine(
      () =>
        asOneGroup(first, 2, () =>
          Promise.all([
            submitSigned(tokenOf(late), lateCustomer, lateTerms.terms, lateTerms.permit),
            submitSigned(tokenOf(onTime), onTimeCustomer, onTimeTerms.terms, onTimeTerms.permit),
          ]),
        ),
      // Before the group is mined, the late customer spends the permit nonce on a permit of 1 unit to
      // the escrow: the group's permit then fails, and the allowance in place is too small for it.
      async () => {
        const message = {
          owner: lateCustomer.address,
          spender: String(permit.message.spender) as Hex,
          value: 1n,
          nonce: BigInt(String(permit.message.nonce)),
          deadline: BigInt(String(permit.message.deadline)),
        };
        const signature = await lateCustomer.signTypedData({
          domain: permit.domain as Parameters<PrivateKeyAccount["signTypedData"]>[0]["domain"],
          types: PERMIT_TYPES,
          primaryType: "Permit",
          message,
        });
        const { v, r, s: sigS } = parseSignature(signature);
        await sendAhead(
          lateCustomer,
          driver.usdc,
          encodeFunctionData({
            abi: usdcAbi,
            functionName: "permit",
            args: [message.owner, message.spender, message.value, message.deadline, Number(v), r, sigS],
          }),
        );
      },
    );
    const hashes = answers.map(({ answers: [answer] }) => {
      expect(answer?.status).toBe(200);
      return answer?.json.pending_transaction as Hex;
    });
    expect(hashes[0]).toBe(hashes[1]);
    const carrier = await driver.client.getTransactionReceipt({ hash: hashes[0] as Hex });
    expect(carrier.status).toBe("success");
    expect(skippedIn(carrier)).toEqual([toFunctionSelector("PermitFailed()")]);
    await waitUntil(
      "the on-time mandate to be active",
      async () => (await mandateOf(onTime.id)).status === "active",
    );
    // The late customer's page asks to sign again; nothing was recorded for that mandate on chain.
    await waitUntil("the late session to ask for a signature again", async () => {
      const session = await api(`/authorize/${tokenOf(late)}/session`, { key: null });
      return session.json.needs_signature === true && session.json.pending_transaction === null;
    });
    expect((await mandateOf(late.id)).status).not.toBe("active");
    await relayerStatuses(
      "the late item failed, the on-time one mined",
      `SELECT t.status FROM billing.mandates m JOIN billing.relayer_transactions t
          ON t.action = 'authorize:' || m.chain_id || ':' || lower(m.onchain_id) || ':1'
        WHERE m.id = ANY ($1::text[]) ORDER BY array_position($1::text[], m.id)`,
      [[late.id, onTime.id]],
      ["reverted", "mined"],
    );
    // Signing again (a new permit) authorises the late mandate.
    const again = await signAndSubmit(tokenOf(late), lateCustomer);
    expect(again.answers[0]?.status).toBe(200);
    await waitUntil(
      "the late mandate to be active",
      async () => (await mandateOf(late.id)).status === "active",
    );
  });
});
