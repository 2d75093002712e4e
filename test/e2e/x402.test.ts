/**
 * x402 with its published packages, unchanged (docs/x402.md): resource servers protected by
 * `@x402/hono`'s and `@x402/express`'s `paymentMiddleware`, their facilitator our `/x402` with the merchant's key, and a client
 * paying with `@x402/fetch` and a viem account holding the local chain's USDC (Circle's FiatTokenV2_2).
 * `payTo` is a payment's deposit address: the settlement pays it, and `payment.paid` follows. Bad
 * authorizations are refused at verify with the specification's reasons, and nothing is sent; the
 * pay page's bounds hold (one transfer in flight per payer, the merchant's share of the relayer's budget).
 * The mandate scheme (ours): 1,000 requests paid with one mandate, charged once with the next invoice.
 *
 * On a stack of its own: x402's client signs its validity window in wall-clock time, which the shared
 * stack's chain has left behind (its tests move the chain's clock forward by months).
 */
import { randomBytes, randomUUID } from "node:crypto";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type ServerType, serve } from "@hono/node-server";
import type { DynamicPayTo, DynamicPrice, HTTPAdapter, HTTPRequestContext } from "@x402/core/http";
import { HTTPFacilitatorClient } from "@x402/core/server";
import type { AssetAmount } from "@x402/core/types";
import { ExactEvmScheme as ExactEvmClient } from "@x402/evm/exact/client";
import { ExactEvmScheme as ExactEvmServer } from "@x402/evm/exact/server";
import {
  x402ResourceServer as ExpressResourceServer,
  paymentMiddleware as expressPaymentMiddleware,
} from "@x402/express";
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from "@x402/fetch";
import { paymentMiddleware, x402ResourceServer } from "@x402/hono";
import express from "express";
import { Hono } from "hono";
import { getAddress, type Hex, parseSignature } from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { X402Deposits } from "../../client/x402-deposits.ts";
import { MandateClientScheme, MandateServerScheme } from "../../client/x402-mandate.ts";
import { usdcAbi } from "../../scripts/stack/circle-usdc.ts";
import { inPool } from "../../scripts/stack/pool.ts";
import { localChain, type ScratchStack, startScratchStack } from "../../scripts/stack/scratch-stack.ts";
import type { RunningStack } from "../../scripts/stack/stack.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import {
  type TransferAuthorization,
  transferAuthorizationTypedData,
} from "../../service/payments/transfer-authorization.ts";
import { verifySignature } from "../../service/webhooks/signature.ts";
import { mandateUsageTypedData } from "../../service/x402/mandate-usage.ts";
import { type PageTypedData, signPageTerms } from "../contract/harness.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import { newAddress, queryAt } from "./helpers.ts";
import { type Received, startReceiver } from "./receiver.ts";
import { exactPaymentPayload } from "./x402-payloads.ts";

const CHAIN = 31337;
/** A second chain whose relayer budget leaves each merchant next to nothing. */
const NARROW = 31341;
const NETWORK: `${string}:${string}` = `eip155:${CHAIN}`;

let scratch: ScratchStack;
let stack: RunningStack;
let chain: ReturnType<typeof chainDriver>;
let receiver: Awaited<ReturnType<typeof startReceiver>>;
let endpointSecret: string;
const servers: Array<ServerType | Server> = [];

// biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON bodies
type Json = any;

const call = async (path: string, body?: unknown, headers: Record<string, string> = {}) => {
  const response = await fetch(`${stack.apiUrl}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: {
      authorization: `Bearer ${stack.devMerchant.apiKey}`,
      ...(body === undefined ? {} : { "content-type": "application/json" }),
      ...headers,
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, json: (text ? JSON.parse(text) : undefined) as Json, text };
};

const ok = async (path: string, body?: unknown) => {
  const answer = await call(path, body, body === undefined ? {} : { "idempotency-key": randomUUID() });
  expect(answer.status, answer.text).toBe(200);
  return answer.json;
};

/** The relayer's transfers by authorization (its sweeps of deposit addresses come at their own pace). */
const relayerTransactions = async () =>
  (
    await queryAt(stack.databaseUrl)<{ n: number }>(
      "SELECT count(*)::int AS n FROM billing.relayer_transactions WHERE chain_id = $1 AND purpose LIKE 'pay-gasless:%'",
      [CHAIN],
    )
  )[0]?.n;

/** The x402 requirements of a payment: exactly what is left to pay, to its deposit address. */
const requirementsOf = (payment: Json) => ({
  scheme: "exact",
  network: NETWORK,
  amount: payment.amount_remaining as string,
  asset: getAddress(chain.usdc),
  payTo: payment.address as string,
  maxTimeoutSeconds: 300,
  extra: { name: "USD Coin", version: "2" },
});

/** A resource server on 127.0.0.1 whose `GET /report` costs the payment's price, settled by our facilitator. */
const startResourceServer = async (payment: Json, seen: string[]) => {
  const auth = { Authorization: `Bearer ${stack.devMerchant.apiKey}` };
  const facilitator = new HTTPFacilitatorClient({
    url: `${stack.apiUrl}/x402`,
    createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: auth }),
  });
  const requirements = requirementsOf(payment);
  const app = new Hono();
  app.use(async (c, next) => {
    const signature = c.req.header("payment-signature");
    if (signature) seen.push(signature);
    await next();
  });
  app.use(
    paymentMiddleware(
      {
        "GET /report": {
          accepts: {
            scheme: "exact",
            network: NETWORK,
            payTo: requirements.payTo,
            price: { amount: requirements.amount, asset: requirements.asset, extra: requirements.extra },
            maxTimeoutSeconds: requirements.maxTimeoutSeconds,
          },
          description: "A report",
        },
      },
      new x402ResourceServer(facilitator).register(NETWORK, new ExactEvmServer()),
    ),
  );
  app.get("/report", (c) => c.json({ report: "the numbers" }));
  const server = await new Promise<ServerType>((resolve) => {
    const started = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(started));
  });
  servers.push(server);
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
};

/** A wallet holding `amount` of the chain's USDC and no ether: it pays only by signing. */
const newPayer = async (amount: string) => {
  const account = privateKeyToAccount(generatePrivateKey());
  await chain.mint(account.address, usd(amount));
  return account;
};

/** An x402 payload as `@x402/evm`'s client builds it, signed by `signer` over `signed` (default: what it claims). */
const payloadOf = async <R>(
  signer: PrivateKeyAccount,
  requirements: R,
  claimed: TransferAuthorization,
  signed: TransferAuthorization = claimed,
) =>
  exactPaymentPayload(
    requirements,
    claimed,
    await signer.signTypedData(
      transferAuthorizationTypedData(
        { name: "USD Coin", version: "2", chainId: CHAIN, verifyingContract: getAddress(chain.usdc) },
        signed,
      ),
    ),
  );

const newNonce = () => `0x${randomBytes(32).toString("hex")}` as Hex;

/** Requirements with a payTo made per request (client/x402-deposits.ts), as a route's unpaid request gets them. */
const perRequestRequirements = async (amount: string, path: string) => {
  const auth = { Authorization: `Bearer ${stack.devMerchant.apiKey}` };
  const facilitator = new HTTPFacilitatorClient({
    url: `${stack.apiUrl}/x402`,
    createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: auth }),
  });
  const accepts = (await X402Deposits.load(facilitator)).exact({
    network: NETWORK,
    price: { amount, asset: getAddress(chain.usdc), extra: { name: "USD Coin", version: "2" } },
    maxTimeoutSeconds: 300,
  });
  const context: HTTPRequestContext = { adapter: {} as HTTPAdapter, path, method: "GET" };
  const payTo = await (accepts.payTo as DynamicPayTo)(context);
  const price = (await (accepts.price as DynamicPrice)(context)) as AssetAmount;
  return {
    scheme: "exact",
    network: NETWORK,
    amount: price.amount,
    asset: price.asset,
    payTo,
    maxTimeoutSeconds: 300,
    extra: price.extra,
  };
};

/** The payer's authorization of exactly the requirements' amount to their payTo, and the settle request for it. */
const perRequestPayment = async (
  payer: PrivateKeyAccount,
  requirements: Awaited<ReturnType<typeof perRequestRequirements>>,
  nonce = newNonce(),
) => {
  const now = BigInt(Math.floor(Date.now() / 1000));
  const authorization: TransferAuthorization = {
    from: payer.address,
    to: getAddress(requirements.payTo),
    value: BigInt(requirements.amount),
    validAfter: now - 600n,
    validBefore: now + 300n,
    nonce,
  };
  const paymentPayload = await payloadOf(payer, requirements, authorization);
  const request = { x402Version: 2, paymentPayload, paymentRequirements: requirements };
  return { authorization, signature: paymentPayload.payload.signature, request };
};

/** The ids of the payments recorded at a deposit address. */
const paymentsAt = async (address: string) =>
  (
    await queryAt(stack.databaseUrl)<{ id: string }>(
      "SELECT id FROM billing.payments WHERE deposit_address = $1",
      [address.toLowerCase()],
    )
  ).map((row) => row.id);

beforeAll(async () => {
  scratch = await startScratchStack("x402", {
    chains: [
      localChain({ name: "x402 chain", hold_seconds: 0 }),
      // Each merchant's share of the relayer's budget a millionth (10^12 wei: less than any transaction).
      localChain({
        id: NARROW,
        name: "x402 narrow-share chain",
        hold_seconds: 0,
        relayer_merchant_share: 0.000001,
      }),
    ],
    logLevel: "Error",
  });
  stack = scratch.stack;
  chain = chainDriver(CHAIN, stack.chainsFile);
  receiver = await startReceiver();
  const endpoint = await ok("/v1/webhook_endpoints", { url: receiver.url, events: ["payment.paid"] });
  endpointSecret = endpoint.secret;
}, 180_000);

afterAll(async () => {
  for (const server of servers) server.close();
  await receiver?.close();
  await scratch?.stop();
});

describe("x402 facilitator", () => {
  it("lists the exact and mandate schemes on the merchant's chains and the relayer that settles", async () => {
    const supported = await ok("/x402/supported");
    const chains = (await ok("/v1/merchant/chains")).data as Json[];
    // exact: the escrow's terms of the merchant's payments there, from which a payTo is made per request.
    const depositTerms = (id: number) => ({
      escrow: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/),
      payee: getAddress(chains.find((c) => c.chain === id).payout_address),
      operator: expect.stringMatching(/^0x[0-9a-fA-F]{40}$/),
      holdSeconds: 0,
    });
    expect(supported).toEqual({
      kinds: [
        { x402Version: 2, scheme: "exact", network: NETWORK, extra: { depositTerms: depositTerms(CHAIN) } },
        { x402Version: 2, scheme: "mandate", network: NETWORK },
        {
          x402Version: 2,
          scheme: "exact",
          network: `eip155:${NARROW}`,
          extra: { depositTerms: depositTerms(NARROW) },
        },
        { x402Version: 2, scheme: "mandate", network: `eip155:${NARROW}` },
      ],
      extensions: [],
      signers: { "eip155:*": [privateKeyToAccount(stack.relayerKey).address] },
    });
  });

  let paid: { payment: Json; signatureHeader: string; transaction: string } | undefined;

  it("a route behind @x402/hono answers 402, @x402/fetch pays it through our facilitator, and payment.paid follows", async () => {
    const payment = await ok("/v1/payments", { amount_decimal: "4", reference: "x402-report", chain: CHAIN });
    const seen: string[] = [];
    const resource = await startResourceServer(payment, seen);

    const unpaid = await fetch(`${resource}/report`);
    expect(unpaid.status).toBe(402);
    const required = JSON.parse(
      Buffer.from(unpaid.headers.get("payment-required") ?? "", "base64").toString(),
    );
    expect(required.accepts).toEqual([expect.objectContaining(requirementsOf(payment))]);

    const payer = await newPayer("10");
    // The local USDC is no default asset of @x402/evm's: the client opts in to it, with a cap a payment.
    const client = x402Client.fromConfig({
      schemes: [{ network: NETWORK, client: new ExactEvmClient(payer) }],
      spendControls: {
        allowedAssets: [{ network: NETWORK, asset: getAddress(chain.usdc), maxAmountPerPayment: "5000000" }],
      },
    });
    const pay = wrapFetchWithPayment(fetch, client);
    const before = await relayerTransactions();
    const answered = await pay(`${resource}/report`);
    expect(answered.status, await answered.clone().text()).toBe(200);
    expect(await answered.json()).toEqual({ report: "the numbers" });
    const settlement = decodePaymentResponseHeader(answered.headers.get("payment-response") ?? "");
    expect(settlement).toMatchObject({ success: true, network: NETWORK, payer: payer.address });
    expect(settlement.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    expect(await relayerTransactions()).toBe((before ?? 0) + 1);
    const receipt = await chain.client.getTransactionReceipt({ hash: settlement.transaction as Hex });
    expect(receipt.status).toBe("success");

    await waitFor(async () => (await ok(`/v1/payments/${payment.id}`)).status === "paid", {
      timeoutMs: 60_000,
      intervalMs: 200,
      what: "the payment paid",
    });
    const after = await ok(`/v1/payments/${payment.id}`);
    expect(after.transfers.map((t: Json) => t.transaction_hash)).toContain(settlement.transaction);
    const paidEvent = () =>
      receiver.received.find(
        (r: Received) => r.event.type === "payment.paid" && (r.event.data.object as Json)?.id === payment.id,
      );
    await waitFor(async () => paidEvent() !== undefined, {
      timeoutMs: 60_000,
      intervalMs: 100,
      what: "payment.paid delivered",
    });
    const event = paidEvent() as Received;
    expect(
      verifySignature({
        header: event.headers["x-service-signature"] as string,
        body: event.raw,
        secrets: endpointSecret,
        now: Math.floor(Date.now() / 1000),
      }),
    ).toMatchObject({ ok: true });
    const listed = await ok("/v1/payments?reference=x402-report");
    expect(listed.data.map((p: Json) => p.id)).toEqual([payment.id]);
    paid = { payment, signatureHeader: seen.at(-1) ?? "", transaction: settlement.transaction };
  });

  it("settles the same payload again with the same transaction, and verifies it no more", async () => {
    expect(paid).toBeDefined();
    if (paid === undefined) return;
    const paymentPayload = JSON.parse(Buffer.from(paid.signatureHeader, "base64").toString());
    const request = { x402Version: 2, paymentPayload, paymentRequirements: requirementsOf(paid.payment) };
    const before = await relayerTransactions();
    const again = await call("/x402/settle", request);
    expect(again.status, again.text).toBe(200);
    expect(again.json).toMatchObject({ success: true, transaction: paid.transaction });
    expect(again.json.extra).toEqual({ payment: paid.payment.id });
    const verified = await call("/x402/verify", request);
    expect(verified.json).toMatchObject({ isValid: false, invalidReason: "invalid_payment_requirements" });
    expect(await relayerTransactions()).toBe(before);
  });

  it("a route behind @x402/express prices each order by its own payment (payTo and price looked up per request), as docs/x402.md shows", async () => {
    const orders = new Map<string, Json>([
      ["a", await ok("/v1/payments", { amount_decimal: "3", reference: "x402-order-a", chain: CHAIN })],
      ["b", await ok("/v1/payments", { amount_decimal: "1.5", reference: "x402-order-b", chain: CHAIN })],
    ]);
    const paymentOf = (context: HTTPRequestContext) => {
      const payment = orders.get(context.path.split("/")[2] ?? "");
      if (payment === undefined) throw new Error(`no order at ${context.path}`);
      return payment;
    };
    const auth = { Authorization: `Bearer ${stack.devMerchant.apiKey}` };
    const facilitator = new HTTPFacilitatorClient({
      url: `${stack.apiUrl}/x402`,
      createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: auth }),
    });
    const app = express();
    app.use(
      expressPaymentMiddleware(
        {
          "GET /orders/:id/receipt": {
            accepts: {
              scheme: "exact",
              network: NETWORK,
              payTo: (context) => paymentOf(context).address,
              price: (context) => ({
                amount: paymentOf(context).amount_remaining,
                asset: paymentOf(context).token_address,
                extra: { name: "USD Coin", version: "2" },
              }),
              maxTimeoutSeconds: 300,
            },
          },
        },
        new ExpressResourceServer(facilitator).register(NETWORK, new ExactEvmServer()),
      ),
    );
    app.get("/orders/:id/receipt", (request, response) => {
      response.json({ receipt: request.params.id });
    });
    const server = await new Promise<Server>((resolve) => {
      const started = app.listen(0, "127.0.0.1", () => resolve(started));
    });
    servers.push(server);
    const resource = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const payer = await newPayer("5");
    const client = x402Client.fromConfig({
      schemes: [{ network: NETWORK, client: new ExactEvmClient(payer) }],
      spendControls: {
        allowedAssets: [{ network: NETWORK, asset: getAddress(chain.usdc), maxAmountPerPayment: "5000000" }],
      },
    });
    const answered = await wrapFetchWithPayment(fetch, client)(`${resource}/orders/a/receipt`);
    expect(answered.status, await answered.clone().text()).toBe(200);
    expect(await answered.json()).toEqual({ receipt: "a" });
    const settlement = decodePaymentResponseHeader(answered.headers.get("payment-response") ?? "");
    expect(settlement).toMatchObject({ success: true, network: NETWORK, payer: payer.address });
    const a = orders.get("a") as Json;
    await waitFor(async () => (await ok(`/v1/payments/${a.id}`)).status === "paid", {
      timeoutMs: 60_000,
      intervalMs: 200,
      what: "order a's payment paid",
    });
    expect(await chain.balanceOf(payer.address)).toBe(usd("2"));

    // Order b asks for its own payment, untouched by a's.
    const b = orders.get("b") as Json;
    const unpaid = await fetch(`${resource}/orders/b/receipt`);
    expect(unpaid.status).toBe(402);
    const required = JSON.parse(
      Buffer.from(unpaid.headers.get("payment-required") ?? "", "base64").toString(),
    );
    expect(required.accepts).toEqual([expect.objectContaining({ payTo: b.address, amount: "1500000" })]);
    expect((await ok(`/v1/payments/${b.id}`)).status).toBe("requires_payment");
  });

  it("a route with a fixed price makes payTo per request (client/x402-deposits.ts): unpaid requests record nothing, each paid one is a payment of its own", async () => {
    const auth = { Authorization: `Bearer ${stack.devMerchant.apiKey}` };
    const facilitator = new HTTPFacilitatorClient({
      url: `${stack.apiUrl}/x402`,
      createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: auth }),
    });
    const deposits = await X402Deposits.load(facilitator);
    const app = new Hono();
    app.use(
      paymentMiddleware(
        {
          "GET /quote": {
            accepts: deposits.exact({
              network: NETWORK,
              price: {
                amount: "250000",
                asset: getAddress(chain.usdc),
                extra: { name: "USD Coin", version: "2" },
              },
              maxTimeoutSeconds: 300,
            }),
          },
        },
        new x402ResourceServer(facilitator).register(NETWORK, new ExactEvmServer()),
      ),
    );
    app.get("/quote", (c) => c.json({ quote: 42 }));
    const server = await new Promise<ServerType>((resolve) => {
      const started = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(started));
    });
    servers.push(server);
    const resource = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const paymentsNow = async () =>
      (
        await queryAt(stack.databaseUrl)<{ n: number }>(
          "SELECT count(*)::int AS n FROM billing.payments WHERE description LIKE 'x402: %/quote'",
        )
      )[0]?.n ?? 0;

    const unpaid = await Promise.all(Array.from({ length: 3 }, () => fetch(`${resource}/quote`)));
    const payTos = unpaid.map((response) => {
      expect(response.status).toBe(402);
      const required = JSON.parse(
        Buffer.from(response.headers.get("payment-required") ?? "", "base64").toString(),
      );
      expect(required.accepts[0]).toMatchObject({
        amount: "250000",
        extra: { name: "USD Coin", version: "2" },
      });
      expect(required.accepts[0].extra.escrowPaymentId).toMatch(/^0x[0-9a-f]{64}$/);
      return required.accepts[0].payTo as string;
    });
    expect(new Set(payTos).size).toBe(3);
    expect(await paymentsNow()).toBe(0);

    const settled: Json[] = [];
    for (const amount of ["1", "1"]) {
      const payer = await newPayer(amount);
      const client = x402Client.fromConfig({
        schemes: [{ network: NETWORK, client: new ExactEvmClient(payer) }],
        spendControls: {
          allowedAssets: [{ network: NETWORK, asset: getAddress(chain.usdc), maxAmountPerPayment: "250000" }],
        },
      });
      const answered = await wrapFetchWithPayment(fetch, client)(`${resource}/quote`);
      expect(answered.status, await answered.clone().text()).toBe(200);
      expect(await answered.json()).toEqual({ quote: 42 });
      const settlement = decodePaymentResponseHeader(answered.headers.get("payment-response") ?? "");
      expect(settlement).toMatchObject({ success: true, payer: payer.address });
      settled.push(settlement);
      expect(await chain.balanceOf(payer.address)).toBe(usd("0.75"));
    }
    const ids = settled.map((s) => (s.extra as Json).payment as string);
    expect(ids[0]).toMatch(/^pay_/);
    expect(new Set(ids).size).toBe(2);
    expect(await paymentsNow()).toBe(2);
    for (const id of ids)
      await waitFor(async () => (await ok(`/v1/payments/${id}`)).status === "paid", {
        timeoutMs: 60_000,
        intervalMs: 200,
        what: `${id} paid`,
      });
    const payment = await ok(`/v1/payments/${ids[0]}`);
    expect(payment).toMatchObject({ amount: "250000", description: `x402: ${resource}/quote` });
    expect(payment.transfers.map((t: Json) => t.transaction_hash)).toEqual([settled[0].transaction]);
  });

  it("settles the same payload to a payTo made per request twice at once: one payment, one transfer, one answer", async () => {
    const requirements = await perRequestRequirements("500000", "/twice");
    const payer = await newPayer("0.5");
    const { request } = await perRequestPayment(payer, requirements);
    const before = await relayerTransactions();
    const answers = await Promise.all([call("/x402/settle", request), call("/x402/settle", request)]);
    for (const answer of answers) {
      expect(answer.status, answer.text).toBe(200);
      expect(answer.json, answer.text).toMatchObject({ success: true, payer: payer.address });
    }
    expect(answers[1]?.json.transaction).toBe(answers[0]?.json.transaction);
    expect(answers[1]?.json.extra).toEqual(answers[0]?.json.extra);
    expect(await relayerTransactions()).toBe((before ?? 0) + 1);
    expect(await paymentsAt(requirements.payTo)).toEqual([answers[0]?.json.extra.payment]);
    // Once more, after it is mined: the recorded payment's path answers with the same transfer.
    const again = await call("/x402/settle", request);
    expect(again.json).toMatchObject({ success: true, transaction: answers[0]?.json.transaction });
  });

  it("an authorization sent to the token before its settle: the settle is refused as used, and the payment is recorded and paid from that transfer; a used nonce to an empty address records nothing", async () => {
    const requirements = await perRequestRequirements("400000", "/elsewhere");
    const payer = await newPayer("0.4");
    const { authorization, signature, request } = await perRequestPayment(payer, requirements);
    const { from, to, value, validAfter, validBefore, nonce } = authorization;
    await chain.call(await chain.newStranger(), chain.usdc, usdcAbi, "transferWithAuthorization", [
      from,
      to,
      value,
      validAfter,
      validBefore,
      nonce,
      signature,
    ]);
    expect(await chain.balanceOf(to)).toBe(400_000n);
    const before = await relayerTransactions();
    const settled = await call("/x402/settle", request);
    expect(settled.json, settled.text).toMatchObject({
      success: false,
      errorReason: "invalid_transaction_state",
    });
    const [id] = await paymentsAt(to);
    expect(id).toMatch(/^pay_/);
    expect(settled.json.errorMessage).toContain(`${id} is recorded for payTo`);
    await chain.mine();
    await waitFor(async () => (await ok(`/v1/payments/${id}`)).status === "paid", {
      timeoutMs: 60_000,
      intervalMs: 200,
      what: "the payment paid from the transfer sent without us",
    });
    expect(await relayerTransactions()).toBe(before);

    // The same used nonce, signed to another address made per request, which holds nothing.
    const empty = await perRequestRequirements("400000", "/elsewhere");
    const replayed = await perRequestPayment(payer, empty, nonce);
    const refused = await call("/x402/settle", replayed.request);
    expect(refused.json).toMatchObject({ success: false, errorReason: "invalid_transaction_state" });
    expect(refused.json.errorMessage).not.toContain("is recorded");
    expect(await paymentsAt(empty.payTo)).toEqual([]);
  });

  it("bounds a payer across payments as the pay page does; a settle that outwaits its block answers settlement_pending, and settling again returns it mined", async () => {
    const payments = await Promise.all(
      Array.from({ length: 5 }, () => ok("/v1/payments", { amount_decimal: "2", chain: CHAIN })),
    );
    // One payment's worth, signed for each of five payments at once.
    const payer = await newPayer("2");
    const now = BigInt(Math.floor(Date.now() / 1000));
    const requests = await Promise.all(
      payments.map(async (payment) => {
        const requirements = requirementsOf(payment);
        const authorization: TransferAuthorization = {
          from: payer.address,
          to: getAddress(payment.address),
          value: usd("2"),
          validAfter: now - 600n,
          validBefore: now + 300n,
          nonce: newNonce(),
        };
        return {
          x402Version: 2,
          paymentPayload: await payloadOf(payer, requirements, authorization),
          paymentRequirements: requirements,
        };
      }),
    );
    const before = await relayerTransactions();
    await chain.rpc("evm_setAutomine", [false]);
    let answers: Awaited<ReturnType<typeof call>>[];
    try {
      answers = await Promise.all(requests.map((request) => call("/x402/settle", request)));
    } finally {
      await chain.rpc("evm_setAutomine", [true]);
    }
    const pending = answers.filter((a) => a.json?.errorReason === "settlement_pending");
    expect(pending, JSON.stringify(answers.map((a) => a.json))).toHaveLength(1);
    expect(pending[0]?.json.transaction).toMatch(/^0x[0-9a-f]{64}$/);
    for (const answer of answers.filter((a) => a !== pending[0])) {
      if (answer.status === 429) expect(answer.json.error.code).toBe("authorization_in_flight");
      else
        expect(answer.json, answer.text).toMatchObject({ success: false, errorReason: "insufficient_funds" });
    }
    expect(await relayerTransactions()).toBe((before ?? 0) + 1);

    await chain.mine(1);
    const index = answers.indexOf(pending[0] as (typeof answers)[number]);
    const again = await call("/x402/settle", requests[index]);
    expect(again.json).toMatchObject({ success: true, transaction: pending[0]?.json.transaction });
    expect(await relayerTransactions()).toBe((before ?? 0) + 1);
  });

  it("bounds settlements by the merchant's share of the relayer's budget: 503 relayer_share_exhausted, nothing sent", async () => {
    const narrow = chainDriver(NARROW, stack.chainsFile);
    const payment = await ok("/v1/payments", { amount_decimal: "1", chain: NARROW });
    const payer = privateKeyToAccount(generatePrivateKey());
    await narrow.mint(payer.address, usd("1"));
    const now = BigInt(Math.floor(Date.now() / 1000));
    const requirements = {
      scheme: "exact",
      network: `eip155:${NARROW}`,
      amount: payment.amount_remaining as string,
      asset: getAddress(narrow.usdc),
      payTo: payment.address as string,
      maxTimeoutSeconds: 300,
    };
    const authorization: TransferAuthorization = {
      from: payer.address,
      to: getAddress(payment.address),
      value: usd("1"),
      validAfter: now - 600n,
      validBefore: now + 300n,
      nonce: newNonce(),
    };
    const signature = await payer.signTypedData(
      transferAuthorizationTypedData(
        { name: "USD Coin", version: "2", chainId: NARROW, verifyingContract: getAddress(narrow.usdc) },
        authorization,
      ),
    );
    const request = {
      x402Version: 2,
      paymentPayload: exactPaymentPayload(requirements, authorization, signature),
      paymentRequirements: requirements,
    };
    expect((await call("/x402/verify", request)).json).toEqual({ isValid: true, payer: payer.address });
    const settled = await fetch(`${stack.apiUrl}/x402/settle`, {
      method: "POST",
      headers: { authorization: `Bearer ${stack.devMerchant.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify(request),
    });
    const text = await settled.text();
    expect(settled.status, text).toBe(503);
    expect(JSON.parse(text).error.code).toBe("relayer_share_exhausted");
    expect(Number(settled.headers.get("retry-after"))).toBeGreaterThan(0);
    const [sent] = await queryAt(stack.databaseUrl)<{ n: number }>(
      "SELECT count(*)::int AS n FROM billing.relayer_transactions WHERE chain_id = $1",
      [NARROW],
    );
    expect(sent?.n).toBe(0);
  });

  it("refuses bad authorizations at verify and settle with the specification's reasons, and sends nothing", async () => {
    const payment = await ok("/v1/payments", { amount_decimal: "4", chain: CHAIN });
    const requirements = requirementsOf(payment);
    const payer = await newPayer("10");
    const now = BigInt(Math.floor(Date.now() / 1000));
    const good: TransferAuthorization = {
      from: payer.address,
      to: getAddress(payment.address),
      value: usd("4"),
      validAfter: now - 600n,
      validBefore: now + 300n,
      nonce: newNonce(),
    };
    // A nonce the payer already used on the token (a transfer it sent itself).
    const used = newNonce();
    const spent = { ...good, to: newAddress(), value: 1n, nonce: used };
    const spentSignature = parseSignature((await payloadOf(payer, requirements, spent)).payload.signature);
    const sender = await chain.newStranger();
    await chain.call(sender, chain.usdc, usdcAbi, "transferWithAuthorization", [
      spent.from,
      spent.to,
      spent.value,
      spent.validAfter,
      spent.validBefore,
      spent.nonce,
      Number(spentSignature.v),
      spentSignature.r,
      spentSignature.s,
    ]);
    const poor = await newPayer("1");

    const cases: Array<[string, Json, string]> = [
      [
        "wrong recipient",
        await payloadOf(payer, requirements, { ...good, to: newAddress() }),
        "invalid_exact_evm_payload_recipient_mismatch",
      ],
      [
        "expired",
        await payloadOf(payer, requirements, { ...good, validBefore: now - 10n }),
        "invalid_exact_evm_payload_authorization_valid_before",
      ],
      [
        "not valid yet",
        await payloadOf(payer, requirements, { ...good, validAfter: now + 3600n }),
        "invalid_exact_evm_payload_authorization_valid_after",
      ],
      [
        "replayed nonce",
        await payloadOf(payer, requirements, { ...good, nonce: used }),
        "invalid_transaction_state",
      ],
      [
        "insufficient balance",
        await payloadOf(poor, requirements, { ...good, from: poor.address }),
        "insufficient_funds",
      ],
      [
        "tampered amount (signed 1 unit, claims 4 USDC)",
        await payloadOf(payer, requirements, good, { ...good, value: 1n }),
        "invalid_exact_evm_payload_signature",
      ],
      [
        "less than the requirements",
        await payloadOf(payer, requirements, { ...good, value: usd("1") }),
        "invalid_exact_evm_payload_authorization_value_mismatch",
      ],
      [
        "signed by another key",
        await payloadOf(poor, requirements, good),
        "invalid_exact_evm_payload_signature",
      ],
    ];
    const before = await relayerTransactions();
    for (const [what, paymentPayload, reason] of cases) {
      const request = { x402Version: 2, paymentPayload, paymentRequirements: requirements };
      const verified = await call("/x402/verify", request);
      expect(verified.status, `${what}: ${verified.text}`).toBe(200);
      expect(verified.json, what).toMatchObject({ isValid: false, invalidReason: reason });
      const settled = await call("/x402/settle", request);
      expect(settled.status, `${what}: ${settled.text}`).toBe(200);
      expect(settled.json, what).toMatchObject({
        success: false,
        errorReason: reason,
        transaction: "",
        network: NETWORK,
      });
    }

    const valid = await payloadOf(payer, requirements, good);
    const payout = getAddress(
      (await ok("/v1/merchant/chains")).data.find((c: Json) => c.chain === CHAIN).payout_address,
    );
    const elsewhere = [
      [
        "a network the merchant has not configured",
        { ...requirements, network: "eip155:1" },
        "invalid_network",
      ],
      ["another scheme", { ...requirements, scheme: "upto" }, "unsupported_scheme"],
      [
        "payTo not a deposit address of the merchant's",
        { ...requirements, payTo: newAddress() },
        "invalid_payment_requirements",
      ],
      [
        "payTo the merchant's payout address",
        { ...requirements, payTo: payout },
        "invalid_payment_requirements",
      ],
      [
        "payTo made per request, not the address its escrowPaymentId gives",
        {
          ...requirements,
          payTo: newAddress(),
          extra: { ...requirements.extra, escrowPaymentId: newNonce() },
        },
        "invalid_payment_requirements",
      ],
      [
        "another token domain",
        { ...requirements, extra: { name: "USDC", version: "2" } },
        "invalid_payment_requirements",
      ],
    ] as const;
    for (const [what, paymentRequirements, reason] of elsewhere) {
      const to = getAddress(paymentRequirements.payTo);
      const verified = await call("/x402/verify", {
        x402Version: 2,
        paymentPayload: await payloadOf(payer, paymentRequirements, { ...good, to }),
        paymentRequirements,
      });
      expect(verified.json, what).toMatchObject({ isValid: false, invalidReason: reason });
    }
    const version1 = await call("/x402/verify", {
      x402Version: 1,
      paymentPayload: { ...valid, x402Version: 1 },
      paymentRequirements: requirements,
    });
    expect(version1.json).toMatchObject({ isValid: false, invalidReason: "invalid_x402_version" });
    const mismatched = await call("/x402/verify", {
      x402Version: 2,
      paymentPayload: valid,
      paymentRequirements: { ...requirements, amount: usd("3").toString() },
    });
    expect(mismatched.json).toMatchObject({ isValid: false, invalidReason: "invalid_payment_requirements" });
    const malformed = await call("/x402/verify", {
      x402Version: 2,
      paymentPayload: { ...valid, payload: { signature: "0x12" } },
      paymentRequirements: requirements,
    });
    expect(malformed.json).toMatchObject({ isValid: false, invalidReason: "invalid_payload" });
    const notX402 = await call("/x402/verify", { x402Version: 2 });
    expect(notX402.status).toBe(400);
    expect(notX402.json.error.code).toBe("parameter_missing");
    const anonymous = await fetch(`${stack.apiUrl}/x402/verify`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ x402Version: 2, paymentPayload: valid, paymentRequirements: requirements }),
    });
    expect(anonymous.status).toBe(401);

    // Nothing was sent for any of them; the good one verifies.
    expect(await relayerTransactions()).toBe(before);
    const verified = await call("/x402/verify", {
      x402Version: 2,
      paymentPayload: valid,
      paymentRequirements: requirements,
    });
    expect(verified.json).toEqual({ isValid: true, payer: payer.address });
  });
});

describe("x402's mandate scheme (ours)", () => {
  let signed: { subscription: Json; mandate: Json; customer: PrivateKeyAccount } | undefined;

  it("1,000 requests paid by one mandate signature: usage recorded at once, one charge of exactly their sum with the next invoice; over the cap a 402 says so", async () => {
    const customer = privateKeyToAccount(generatePrivateKey());
    await chain.mint(customer.address, usd("100"));
    const price = await ok("/v1/prices", {
      product_name: "API calls",
      amount_decimal: "0",
      usage: { unit_amount_decimal: "0.001", unit: "call" },
      chain: CHAIN,
    });
    const subscription = await ok("/v1/subscriptions", {
      customer: "agent-7",
      price: price.id,
      cap_decimal: "5",
    });
    // The customer signs the mandate once, on the authorization page's API.
    const token = String(subscription.authorization_url).split("/authorize/")[1] ?? "";
    const onPage = async (path: string, body: unknown) => {
      const response = await fetch(`${stack.apiUrl}/authorize/${token}/${path}`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      const text = await response.text();
      expect(response.status, text).toBe(200);
      return JSON.parse(text) as Json;
    };
    const { terms, permit } = (await onPage("terms", { customer_address: customer.address })) as {
      terms: PageTypedData;
      permit: PageTypedData | null;
    };
    await onPage("signatures", await signPageTerms(customer, terms, permit));
    await waitFor(async () => (await ok(`/v1/subscriptions/${subscription.id}`)).status === "active", {
      timeoutMs: 60_000,
      intervalMs: 200,
      what: "the subscription active",
    });
    const mandate = await ok(`/v1/mandates/${subscription.mandate}`);
    signed = { subscription, mandate, customer };

    const facilitator = new HTTPFacilitatorClient({
      url: `${stack.apiUrl}/x402`,
      createAuthHeaders: async () => {
        const auth = { Authorization: `Bearer ${stack.devMerchant.apiKey}` };
        return { verify: auth, settle: auth, supported: auth };
      },
    });
    const accepts = (amount: string) => ({
      scheme: "mandate",
      network: NETWORK,
      payTo: mandate.payee_address as string,
      price: { amount, asset: getAddress(chain.usdc) },
      maxTimeoutSeconds: 300,
    });
    const app = new Hono();
    app.use(
      paymentMiddleware(
        {
          "GET /call": { accepts: accepts("2000"), description: "One call, 0.002 USDC" },
          "GET /bulk": { accepts: accepts("4000000"), description: "A bulk export, 4 USDC" },
        },
        new x402ResourceServer(facilitator).register(NETWORK, new MandateServerScheme()),
      ),
    );
    app.get("/call", (c) => c.json({ ok: true }));
    app.get("/bulk", (c) => c.json({ rows: [] }));
    const server = await new Promise<ServerType>((resolve) => {
      const started = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(started));
    });
    servers.push(server);
    const resource = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

    const client = x402Client.fromConfig({
      schemes: [
        {
          network: NETWORK,
          client: new MandateClientScheme({ subscription: subscription.id, signer: customer }),
        },
      ],
      spendControls: { allowedAssets: [{ network: NETWORK, asset: getAddress(chain.usdc) }] },
    });
    const pay = wrapFetchWithPayment(fetch, client);
    const unpaid = await fetch(`${resource}/call`);
    expect(unpaid.status).toBe(402);

    const relayedBefore = await relayerTransactions();
    const started = performance.now();
    const statuses = await inPool(Array.from({ length: 1_000 }), 8, async () => {
      const answered = await pay(`${resource}/call`);
      await answered.arrayBuffer();
      return answered.status;
    });
    const seconds = (performance.now() - started) / 1000;
    expect(statuses.filter((status) => status !== 200)).toEqual([]);
    console.info("x402 mandate scheme:", { requests: 1_000, seconds, per_second: 1_000 / seconds });
    const [recorded] = await queryAt(stack.databaseUrl)<{ n: number; units: string }>(
      "SELECT count(*)::int AS n, sum(quantity)::text AS units FROM billing.usage_records WHERE subscription_id = $1 AND status = 'billable'",
      [subscription.id],
    );
    expect(recorded).toEqual({ n: 1_000, units: "2000" });
    // Nothing moved on chain for them.
    expect(await relayerTransactions()).toBe(relayedBefore);

    // 2 USDC used of the 5 the mandate allows a month: 4 more would take the next charge above it.
    const over = await pay(`${resource}/bulk`);
    expect(over.status).toBe(402);
    const refused = JSON.parse(Buffer.from(over.headers.get("payment-required") ?? "", "base64").toString());
    expect(JSON.stringify(refused)).toMatch(/mandate_cap_exceeded/);

    // The next invoice charges the period's usage once, exactly its sum, and says so.
    const chargesBefore = await queryAt(stack.databaseUrl)<{ n: number }>(
      "SELECT count(*)::int AS n FROM onchain.charge WHERE chain_id = $1 AND mandate_id = $2",
      [CHAIN, mandate.onchain_id],
    );
    expect(chargesBefore[0]?.n).toBe(0);
    await ok("/v1/test/clock/advance", { seconds: 32 * 86_400, chain: CHAIN });
    const paidInvoice = async () =>
      (await ok(`/v1/invoices?subscription=${subscription.id}`)).data.find(
        (invoice: Json) => invoice.status === "paid" && invoice.total_decimal !== "0",
      );
    await waitFor(async () => (await paidInvoice()) !== undefined, {
      timeoutMs: 90_000,
      intervalMs: 250,
      what: "the usage invoice paid",
    });
    expect(await paidInvoice()).toMatchObject({ total_decimal: "2", amount_paid_decimal: "2" });
    const charges = await queryAt(stack.databaseUrl)<{ amount: string }>(
      "SELECT amount::text AS amount FROM onchain.charge WHERE chain_id = $1 AND mandate_id = $2",
      [CHAIN, mandate.onchain_id],
    );
    expect(charges).toEqual([{ amount: "2000000" }]);
    const invoice = await paidInvoice();
    const eventTypes = async () =>
      (
        await queryAt(stack.databaseUrl)<{ type: string }>(
          "SELECT type FROM billing.events WHERE payload #>> '{data,object,id}' = ANY ($1::text[])",
          [[invoice.id, invoice.charge]],
        )
      ).map((e) => e.type);
    await waitFor(
      async () => {
        const types = await eventTypes();
        return ["charge.succeeded", "invoice.paid"].every((type) => types.includes(type));
      },
      { timeoutMs: 30_000, intervalMs: 200, what: "charge.succeeded and invoice.paid" },
    );
  }, 300_000);

  it("refuses a payment signed by another wallet, expired, replayed, for another payee or an odd amount, and records nothing", async () => {
    expect(signed).toBeDefined();
    if (signed === undefined) return;
    const { subscription, mandate, customer } = signed;
    const now = (await chain.client.getBlock()).timestamp;
    const requirements = {
      scheme: "mandate",
      network: NETWORK,
      amount: "2000",
      asset: getAddress(chain.usdc),
      payTo: getAddress(mandate.payee_address),
      maxTimeoutSeconds: 300,
    };
    const payload = async (
      signer: PrivateKeyAccount,
      required: typeof requirements,
      overrides: { nonce?: Hex; validBefore?: bigint; subscription?: string } = {},
    ) => {
      const message = {
        subscription: overrides.subscription ?? (subscription.id as string),
        payTo: getAddress(required.payTo),
        asset: required.asset,
        amount: BigInt(required.amount),
        nonce: overrides.nonce ?? newNonce(),
        validBefore: overrides.validBefore ?? now + 300n,
      };
      return {
        x402Version: 2,
        accepted: required,
        payload: {
          subscription: message.subscription,
          nonce: message.nonce,
          validBefore: message.validBefore.toString(),
          signature: await signer.signTypedData(mandateUsageTypedData(CHAIN, message)),
        },
      };
    };
    const request = async (signer: PrivateKeyAccount, required = requirements, overrides = {}) => ({
      x402Version: 2,
      paymentPayload: await payload(signer, required, overrides),
      paymentRequirements: required,
    });
    const usageRecords = async () =>
      (
        await queryAt(stack.databaseUrl)<{ n: number }>(
          "SELECT count(*)::int AS n FROM billing.usage_records WHERE subscription_id = $1",
          [subscription.id],
        )
      )[0]?.n;

    // A payment that stands, settled twice: one record.
    const good = await request(customer);
    const before = await usageRecords();
    expect((await call("/x402/verify", good)).json).toEqual({ isValid: true, payer: customer.address });
    const first = await call("/x402/settle", good);
    expect(first.json).toMatchObject({ success: true, payer: customer.address, amount: "2000" });
    expect(first.json.transaction).toMatch(/^ur_/);
    const again = await call("/x402/settle", good);
    expect(again.json.transaction).toBe(first.json.transaction);
    expect(await usageRecords()).toBe((before ?? 0) + 1);

    const cases: Array<[string, Json, string]> = [
      ["replayed", good, "invalid_transaction_state"],
      [
        "signed by another wallet",
        await request(privateKeyToAccount(generatePrivateKey())),
        "invalid_mandate_signature",
      ],
      ["expired", await request(customer, requirements, { validBefore: now - 1n }), "mandate_usage_expired"],
      [
        "for another payee",
        await request(customer, { ...requirements, payTo: getAddress(newAddress()) }),
        "invalid_payment_requirements",
      ],
      [
        "not a whole number of the metered unit (0.001)",
        await request(customer, { ...requirements, amount: "1500" }),
        "invalid_payment_requirements",
      ],
      [
        "an unknown subscription",
        await request(customer, requirements, { subscription: "sub_01KJQ0W0Y0N3X7ZNG8JD0HMJCG" }),
        "invalid_payload",
      ],
      [
        "above the cap",
        await request(customer, { ...requirements, amount: "5000000" }),
        "mandate_cap_exceeded",
      ],
    ];
    const recorded = await usageRecords();
    for (const [what, body, reason] of cases) {
      const verified = await call("/x402/verify", body);
      expect(verified.json, what).toMatchObject({ isValid: false, invalidReason: reason });
      if (what === "replayed") continue;
      const settled = await call("/x402/settle", body);
      expect(settled.json, what).toMatchObject({ success: false, errorReason: reason, transaction: "" });
    }
    expect(await usageRecords()).toBe(recorded);
  });
});
