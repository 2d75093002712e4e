/**
 * `npm run bench:x402`: the x402 facilitator (docs/x402.md) on a scratch stack, in one run:
 *
 * 1. `exact`: N payments, each paid by a payer of its own with an EIP-3009 authorization signed
 *    beforehand, through `POST /x402/verify` then `POST /x402/settle` (which waits for the block), C in
 *    flight; latency of each call and settlements a second. Then N more the same way to a `payTo` made
 *    per request (client/x402-deposits.ts), whose payment the settle records. Beside them, N more
 *    payments paid through the pay page's gasless path (`POST /pay/{token}/authorizations`, which answers
 *    once the relayer has broadcast), the same way: latency and transfers a second. anvil mines each
 *    transaction at once.
 * 2. `mandate`: M requests to a Hono route behind `@x402/hono`'s middleware with the mandate scheme, paid
 *    by `@x402/fetch` with `MandateClientScheme` (402, signature, verify, handler, settle: a usage
 *    record), C in flight; beside it, the same server's bare route fetched with plain `fetch`, the same
 *    way: requests a second and their ratio.
 *
 * X402_N (default 100), X402_MANDATE_N (default 1,000), X402_CONCURRENCY (default 8). Writes
 * bench/results/x402.json.
 */
import type { AddressInfo } from "node:net";
import { type ServerType, serve } from "@hono/node-server";
import type { HTTPAdapter } from "@x402/core/http";
import { HTTPFacilitatorClient } from "@x402/core/server";
import { wrapFetchWithPayment, x402Client } from "@x402/fetch";
import { paymentMiddleware, x402ResourceServer } from "@x402/hono";
import { Hono } from "hono";
import {
  createWalletClient,
  defineChain,
  getAddress,
  type Hex,
  http,
  type PrivateKeyAccount,
  toHex,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { X402Deposits } from "../client/x402-deposits.ts";
import { MandateClientScheme, MandateServerScheme } from "../client/x402-mandate.ts";
import { usdcAbi } from "../scripts/stack/circle-usdc.ts";
import { LOCAL_FAUCET_KEY } from "../scripts/stack/local-chain.ts";
import { inPool } from "../scripts/stack/pool.ts";
import { localChain, startScratchStack, stopOnSignal } from "../scripts/stack/scratch-stack.ts";
import { testWalletKey } from "../service/mandates/terms.ts";
import { transferAuthorizationTypedData } from "../service/payments/transfer-authorization.ts";
import { exactPaymentPayload } from "../test/e2e/x402-payloads.ts";
import { percentiles, ratioTo, type SummaryRow, writeResults } from "./report.ts";
import { stackApi } from "./stack-api.ts";

const N = Number(process.env.X402_N ?? 100);
const M = Number(process.env.X402_MANDATE_N ?? 1_000);
const C = Number(process.env.X402_CONCURRENCY ?? 8);
const CHAIN = 31337;
const NETWORK: `${string}:${string}` = `eip155:${CHAIN}`;
const AMOUNT = 1_000_000n;

const perSecond = (count: number, ms: number) => Math.round((count / (ms / 1000)) * 10) / 10;

/** Runs `task` over `items`, C at a time: each one's milliseconds and the whole run's. */
const timed = async <T>(items: ReadonlyArray<T>, task: (item: T) => Promise<void>) => {
  const started = performance.now();
  const each = await inPool(items, C, async (item) => {
    const at = performance.now();
    await task(item);
    return performance.now() - at;
  });
  return { each, ms: performance.now() - started };
};

const expectOk = async (response: Response, what: string) => {
  const text = await response.text();
  if (!response.ok) throw new Error(`${what}: ${response.status} ${text}`);
  return JSON.parse(text) as Record<string, unknown>;
};

console.log("starting the stack ...");
const scratch = await startScratchStack("x402", {
  chains: [localChain({ name: "x402 bench chain", hold_seconds: 0 })],
  logLevel: "Error",
});
const { stack } = scratch;
stopOnSignal(scratch);
const servers: ServerType[] = [];
try {
  const api = stackApi(stack);
  const resolved = stack.chains[0];
  if (!resolved?.rpc) throw new Error("no resolved chain");
  const usdc = getAddress(resolved.tokens[0]?.address as Hex);
  const chain = defineChain({
    id: CHAIN,
    name: "anvil",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [resolved.rpc.http[0] as string] } },
  });
  const faucet = createWalletClient({
    chain,
    transport: http(resolved.rpc.http[0]),
    account: privateKeyToAccount(LOCAL_FAUCET_KEY),
  });
  const auth = { authorization: `Bearer ${stack.devMerchant.apiKey}`, "content-type": "application/json" };

  const facilitator = new HTTPFacilitatorClient({
    url: `${stack.apiUrl}/x402`,
    createAuthHeaders: async () => {
      const header = { Authorization: auth.authorization };
      return { verify: header, settle: header, supported: header };
    },
  });
  const perRequest = (await X402Deposits.load(facilitator)).exact({
    network: NETWORK,
    price: { amount: AMOUNT.toString(), asset: usdc, extra: { name: "USD Coin", version: "2" } },
  });
  /** A payTo made per request, and its escrow payment id, as a route's unpaid request gets them. */
  const madePerRequest = async () => {
    const context = { adapter: {} as HTTPAdapter, path: "/quote", method: "GET" };
    const payTo = typeof perRequest.payTo === "function" ? await perRequest.payTo(context) : perRequest.payTo;
    const price = (
      typeof perRequest.price === "function" ? await perRequest.price(context) : perRequest.price
    ) as {
      extra: Record<string, unknown>;
    };
    return { address: payTo, escrowPaymentId: price.extra.escrowPaymentId as string };
  };

  /** 3N payments (N made per request), each with a payer holding its amount and an authorization signed for it. */
  console.log(`preparing ${3 * N} payments and payers ...`);
  const now = BigInt(Math.floor(Date.now() / 1000));
  const prepared = await inPool(Array.from({ length: 3 * N }), 8, async (_, i) => {
    const payment: Record<string, unknown> =
      i < 2 * N ? await api("/v1/payments", { amount_decimal: "1" }) : await madePerRequest();
    const payer = privateKeyToAccount(generatePrivateKey());
    const authorization = {
      from: payer.address,
      to: getAddress(payment.address as string),
      value: AMOUNT,
      validAfter: now - 600n,
      validBefore: now + 3600n,
      nonce: toHex(crypto.getRandomValues(new Uint8Array(32))),
    };
    const signature = await payer.signTypedData(
      transferAuthorizationTypedData(
        { name: "USD Coin", version: "2", chainId: CHAIN, verifyingContract: usdc },
        authorization,
      ),
    );
    return { payment, payer, authorization, signature };
  });
  for (const { payer } of prepared)
    await faucet.writeContract({
      address: usdc,
      abi: usdcAbi,
      functionName: "mint",
      args: [payer.address, AMOUNT],
    });
  const x402Side = prepared.slice(0, N);
  const gaslessSide = prepared.slice(N, 2 * N);
  const perRequestSide = prepared.slice(2 * N);

  const verifyMs: number[] = [];
  const settleMs: number[] = [];
  const perRequestVerifyMs: number[] = [];
  const perRequestSettleMs: number[] = [];
  const settleExact =
    (verifyTimes: number[], settleTimes: number[]) =>
    async ({ payment, authorization, signature }: (typeof prepared)[number]) => {
      const requirements = {
        scheme: "exact",
        network: NETWORK,
        amount: AMOUNT.toString(),
        asset: usdc,
        payTo: payment.address as string,
        maxTimeoutSeconds: 300,
        extra: {
          name: "USD Coin",
          version: "2",
          ...(payment.escrowPaymentId === undefined ? {} : { escrowPaymentId: payment.escrowPaymentId }),
        },
      };
      const body = JSON.stringify({
        x402Version: 2,
        paymentPayload: exactPaymentPayload(requirements, authorization, signature),
        paymentRequirements: requirements,
      });
      let at = performance.now();
      const verified = await expectOk(
        await fetch(`${stack.apiUrl}/x402/verify`, { method: "POST", headers: auth, body }),
        "verify",
      );
      verifyTimes.push(performance.now() - at);
      if (verified.isValid !== true) throw new Error(`verify: ${JSON.stringify(verified)}`);
      at = performance.now();
      const settled = await expectOk(
        await fetch(`${stack.apiUrl}/x402/settle`, { method: "POST", headers: auth, body }),
        "settle",
      );
      settleTimes.push(performance.now() - at);
      if (settled.success !== true) throw new Error(`settle: ${JSON.stringify(settled)}`);
    };
  console.log(`exact: ${N} payments through /x402/verify and /x402/settle ...`);
  const exact = await timed(x402Side, settleExact(verifyMs, settleMs));
  console.log(`exact: ${N} more to a payTo made per request ...`);
  const exactPerRequest = await timed(perRequestSide, settleExact(perRequestVerifyMs, perRequestSettleMs));

  console.log(`gasless: ${N} payments through the pay page ...`);
  const gasless = await timed(gaslessSide, async ({ payment, authorization, signature }) => {
    const token = String(payment.payment_url).split("/pay/")[1];
    await expectOk(
      await fetch(`${stack.apiUrl}/pay/${token}/authorizations`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          from: authorization.from,
          to: authorization.to,
          value: authorization.value.toString(),
          valid_after: authorization.validAfter.toString(),
          valid_before: authorization.validBefore.toString(),
          nonce: authorization.nonce,
          signature,
        }),
      }),
      "pay page authorization",
    );
  });

  console.log(`mandate: ${M} paid requests against a bare route ...`);
  const price = await api("/v1/prices", {
    product_name: "API calls",
    amount_decimal: "0",
    usage: { unit_amount_decimal: "0.001", unit: "call" },
  });
  const subscription = await api("/v1/subscriptions", {
    customer: "bench-agent",
    price: price.id,
    cap_decimal: "1000",
  });
  await api(`/v1/test/mandates/${subscription.mandate}/authorize`, {});
  const mandate = await api(`/v1/mandates/${subscription.mandate}`);
  const customer: PrivateKeyAccount = privateKeyToAccount(testWalletKey(String(subscription.mandate)));
  const app = new Hono();
  app.use(
    paymentMiddleware(
      {
        "GET /paid": {
          accepts: {
            scheme: "mandate",
            network: NETWORK,
            payTo: mandate.payee_address as string,
            price: { amount: "1000", asset: usdc },
            maxTimeoutSeconds: 300,
          },
        },
      },
      new x402ResourceServer(facilitator).register(NETWORK, new MandateServerScheme()),
    ),
  );
  app.get("/paid", (c) => c.json({ ok: true }));
  app.get("/bare", (c) => c.json({ ok: true }));
  const server = await new Promise<ServerType>((resolve) => {
    const started = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, () => resolve(started));
  });
  servers.push(server);
  const resource = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const pay = wrapFetchWithPayment(
    fetch,
    x402Client.fromConfig({
      schemes: [
        {
          network: NETWORK,
          client: new MandateClientScheme({ subscription: String(subscription.id), signer: customer }),
        },
      ],
      spendControls: { allowedAssets: [{ network: NETWORK, asset: usdc }] },
    }),
  );
  const requests = Array.from({ length: M });
  const bare = await timed(requests, async () => {
    const response = await fetch(`${resource}/bare`);
    await expectOk(response, "bare route");
  });
  const paid = await timed(requests, async () => {
    const response = await pay(`${resource}/paid`);
    await expectOk(response, "paid route");
  });

  const rates = {
    exact_settlements_per_second: perSecond(N, exact.ms),
    exact_per_request_settlements_per_second: perSecond(N, exactPerRequest.ms),
    gasless_transfers_per_second: perSecond(N, gasless.ms),
    mandate_requests_per_second: perSecond(M, paid.ms),
    bare_requests_per_second: perSecond(M, bare.ms),
  };
  const summary: SummaryRow[] = [
    {
      what: "x402 exact settlements/s (verify + settle, each waits for its block)",
      figure: rates.exact_settlements_per_second,
      unit: "per s",
      baseline: rates.gasless_transfers_per_second,
      baseline_what: "pay page gasless transfers/s (answered at broadcast), same run",
      ratio: ratioTo(N / exact.ms, N / gasless.ms),
      target: null,
      meets_target: null,
    },
    {
      what: "x402 exact settlements/s to a payTo made per request (the settle records the payment)",
      figure: rates.exact_per_request_settlements_per_second,
      unit: "per s",
      baseline: rates.exact_settlements_per_second,
      baseline_what: "x402 exact settlements/s to payments created beforehand, same run",
      ratio: ratioTo(N / exactPerRequest.ms, N / exact.ms),
      target: null,
      meets_target: null,
    },
    {
      what: "x402 mandate-scheme paid requests/s (402, signature, verify, settle)",
      figure: rates.mandate_requests_per_second,
      unit: "per s",
      baseline: rates.bare_requests_per_second,
      baseline_what: "the same server's bare route, same concurrency",
      ratio: ratioTo(M / paid.ms, M / bare.ms),
      target: null,
      meets_target: null,
    },
    {
      what: "x402 mandate-scheme paid requests/s against exact settlements/s",
      figure: rates.mandate_requests_per_second,
      unit: "per s",
      baseline: rates.exact_settlements_per_second,
      baseline_what: "x402 exact settlements/s, same run",
      ratio: ratioTo(M / paid.ms, N / exact.ms),
      target: null,
      meets_target: null,
    },
  ];
  const details = {
    what: "The x402 facilitator: exact (verify, settle) beside the pay page's gasless path; the mandate scheme beside a bare route",
    conditions: `scratch stack, one anvil chain mining each transaction at once, confirmations 0; ${C} requests in flight; the service in the bench's process`,
    n: N,
    mandate_requests: M,
    concurrency: C,
    rates,
    latency_ms: {
      x402_verify: percentiles(verifyMs),
      x402_settle: percentiles(settleMs),
      x402_verify_and_settle: percentiles(exact.each),
      x402_per_request_verify: percentiles(perRequestVerifyMs),
      x402_per_request_settle: percentiles(perRequestSettleMs),
      pay_page_gasless: percentiles(gasless.each),
      mandate_paid_request: percentiles(paid.each),
      bare_request: percentiles(bare.each),
    },
  };
  writeResults("x402", "npm run bench:x402", summary, details);
  console.log(JSON.stringify(details, null, 2));
} finally {
  for (const server of servers) server.close();
  await scratch.stop();
}
