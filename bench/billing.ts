/**
 * `npm run bench:billing`: N subscriptions due at one period boundary, billed end to end (invoice
 * written, batch charge mined, indexed, `invoice.paid`), and the gas each subscription cost on chain.
 *
 * Starts the real stack on fresh ports (embedded Postgres, anvil, Ponder, the service) and sets up N
 * subscriptions the way merchants and customers do: the API opens them, each customer (a fresh wallet
 * holding test USDC) signs terms and permit through the hosted page's JSON API, and the service's relayer
 * sends the authorisations. anvil mines a block a second with a large gas limit while this runs, like a
 * real chain: one block per transaction would measure Ponder's RPC rate limit (about 20 requests a
 * second), not billing. Once every first invoice is paid, the chain's clock moves one month and the
 * measured phase starts: from the boundary to the last `invoice.paid`. N = BILLING_SUBSCRIPTIONS
 * (default 10,000). Writes bench/results/billing.json.
 */
import { writeFileSync } from "node:fs";
import { cpus } from "node:os";
import { PgClient } from "@effect/sql-pg";
import { Effect, ManagedRuntime, Redacted } from "effect";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  encodeFunctionData,
  type Hex,
  http,
  parseEventLogs,
  parseUnits,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { MandateEscrowAbi } from "../abis/MandateEscrow.ts";
import { TestUSDCAbi } from "../abis/TestUSDC.ts";
import { LOCAL_DEPLOYER_KEY } from "../scripts/stack/local-chain.ts";
import { startScratchStack, stopOnSignal } from "../scripts/stack/scratch-stack.ts";
import { type PageTypedData, signPageTerms } from "../test/contract/harness.ts";
import { benchChain } from "./local-chain-config.ts";

const N = Number(process.env.BILLING_SUBSCRIPTIONS ?? 10_000);
const CONCURRENCY = 32;
const MONTH = 31 * 86_400;
const PHASE_TIMEOUT_MS = Number(process.env.BILLING_PHASE_TIMEOUT_S ?? 1_800) * 1000;

const seconds = (since: number) => Math.round((performance.now() - since) / 10) / 100;

/** Runs `task` over `items` with at most CONCURRENCY in flight. */
const pool = async <T>(items: readonly T[], task: (item: T, index: number) => Promise<void>) => {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(CONCURRENCY, items.length) }, async () => {
      for (let i = next++; i < items.length; i = next++) await task(items[i] as T, i);
    }),
  );
};

console.log("starting the stack ...");
const scratch = await startScratchStack("billing", {
  chains: [benchChain("billing")],
  // Every customer signs from this one address, through the page's API.
  page: {
    perAddressPerMinute: 0,
    perTokenPerMinute: 0,
    trustProxy: false,
    authorizationsPerMandatePerDay: 5,
  },
});
const { stack } = scratch;
stopOnSignal(scratch);
try {
  const resolved = stack.chains[0];
  if (!resolved?.rpc || !resolved.escrow.address) throw new Error("no resolved chain");
  const usdc = resolved.tokens[0]?.address as Hex;
  const chain = defineChain({
    id: 31337,
    name: "anvil",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [...resolved.rpc.http] } },
  });
  const client = createPublicClient({ chain, transport: http(resolved.rpc.http[0]) });
  const anvil = (method: string, params: unknown[]) => client.request({ method, params } as never);
  const key = stack.devMerchant.apiKey;
  const api = async (path: string, body?: unknown, auth = true) => {
    const response = await fetch(`${stack.apiUrl}${path}`, {
      method: body === undefined ? "GET" : "POST",
      headers: {
        ...(auth ? { authorization: `Bearer ${key}` } : {}),
        ...(body === undefined
          ? {}
          : { "content-type": "application/json", "idempotency-key": crypto.randomUUID() }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const json = (await response.json()) as Record<string, unknown>;
    if (!response.ok) throw new Error(`${path}: ${response.status} ${JSON.stringify(json)}`);
    return json;
  };
  const database = ManagedRuntime.make(
    PgClient.layer({ url: Redacted.make(stack.databaseUrl), maxConnections: 2 }),
  );
  /** Invoices of `period` in `status`, and the latest paid_at (chain time) among them. */
  const invoices = (period: number, status: string) =>
    database.runPromise(
      Effect.flatMap(
        Effect.service(PgClient.PgClient),
        (sql) => sql<{
          n: number;
          last: number | null;
        }>`SELECT count(*)::int AS n, max(paid_at)::float8 AS last
          FROM billing.invoices WHERE period = ${period} AND status = ${status}`,
      ),
    );
  const waitPaid = async (period: number, what: string) => {
    const since = performance.now();
    for (;;) {
      const [row] = await invoices(period, "paid");
      const paid = row?.n ?? 0;
      if (paid >= N) return;
      if (performance.now() - since > PHASE_TIMEOUT_MS) {
        const stuck = await database.runPromise(
          Effect.flatMap(
            Effect.service(PgClient.PgClient),
            (sql) => sql`SELECT s.status AS subscription, i.status AS invoice, c.status AS charge,
                r.status AS relayer, count(*)::int AS n
              FROM billing.subscriptions s
              LEFT JOIN billing.invoices i ON i.subscription_id = s.id AND i.period = ${period}
              LEFT JOIN billing.charges c ON c.id = i.charge_id
              LEFT JOIN billing.relayer_transactions r ON r.purpose = c.relayer_purpose
              WHERE i.status IS DISTINCT FROM 'paid' GROUP BY 1, 2, 3, 4`,
          ),
        );
        console.error(JSON.stringify(stuck));
        throw new Error(`${what}: only ${paid} of ${N} invoices paid after ${seconds(since)} s`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  };

  const started = performance.now();
  const price = await api("/v1/prices", { product_name: "Seat", amount_decimal: "5", chain: 31337 });
  const subscriptions: { id: string; token: string }[] = [];
  await pool(
    Array.from({ length: N }, (_, i) => i),
    async (i) => {
      const sub = await api("/v1/subscriptions", { customer: `cus_${i}`, price: price.id });
      subscriptions.push({
        id: sub.id as string,
        token: (sub.authorization_url as string).split("/authorize/")[1] ?? "",
      });
    },
  );
  const created = seconds(started);
  console.log(`${N} subscriptions opened in ${created} s`);

  // A block a second, each big enough for a few thousand transactions.
  await anvil("evm_setBlockGasLimit", ["0x3b9aca00"]);
  await anvil("evm_setAutomine", [false]);
  await anvil("evm_setIntervalMining", [1]);

  const fundStarted = performance.now();
  const deployer = createWalletClient({
    chain,
    transport: http(resolved.rpc.http[0]),
    account: privateKeyToAccount(LOCAL_DEPLOYER_KEY),
  });
  const customers = subscriptions.map(() => privateKeyToAccount(generatePrivateKey()));
  let nonce = await client.getTransactionCount({ address: deployer.account.address, blockTag: "pending" });
  const fees = await client.estimateFeesPerGas();
  const mints: Hex[] = [];
  for (const customer of customers) {
    const serialized = await deployer.account.signTransaction({
      chainId: 31337,
      type: "eip1559",
      nonce: nonce++,
      to: usdc,
      gas: 100_000n,
      maxFeePerGas: fees.maxFeePerGas * 4n,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      data: encodeFunctionData({
        abi: TestUSDCAbi,
        functionName: "mint",
        args: [customer.address, parseUnits("100", 6)],
      }),
    });
    mints.push(serialized);
  }
  const hashes: Hex[] = [];
  await pool(mints, async (raw) => {
    hashes.push(await client.sendRawTransaction({ serializedTransaction: raw }));
  });
  await client.waitForTransactionReceipt({ hash: hashes[hashes.length - 1] as Hex, timeout: 120_000 });
  const funded = seconds(fundStarted);
  console.log(`${N} customers funded in ${funded} s`);

  const authStarted = performance.now();
  await pool(subscriptions, async (sub, i) => {
    const customer = customers[i];
    if (!customer) return;
    const request = await api(`/authorize/${sub.token}/terms`, { customer_address: customer.address }, false);
    const terms = request.terms as PageTypedData;
    const permit = request.permit as PageTypedData | null;
    await api(`/authorize/${sub.token}/signatures`, await signPageTerms(customer, terms, permit), false);
  });
  const authorised = seconds(authStarted);
  console.log(`${N} authorisations submitted in ${authorised} s`);
  await waitPaid(0, "first invoices");
  const firstPaid = seconds(authStarted);
  console.log(`${N} first invoices paid ${firstPaid} s after the first signature`);

  // The measured phase: every subscription due at one boundary.
  const fromBlock = (await client.getBlockNumber()) + 1n;
  const boundaryAt = new Date();
  const boundary = performance.now();
  await api("/v1/test/clock/advance", { seconds: MONTH });
  await waitPaid(1, "boundary");
  const elapsed = (performance.now() - boundary) / 1000;
  const logs = parseEventLogs({
    abi: MandateEscrowAbi,
    eventName: "Charged",
    logs: await client.getLogs({ address: resolved.escrow.address as Hex, fromBlock, toBlock: "latest" }),
  });
  const transactions = [...new Set(logs.map((log) => log.transactionHash))];
  const receipts = await Promise.all(transactions.map((hash) => client.getTransactionReceipt({ hash })));
  const gas = receipts.reduce((sum, receipt) => sum + receipt.gasUsed, 0n);
  /** Seconds after the boundary by which the first and last of each step happened (database clock). */
  const [timeline] = await database.runPromise(
    Effect.flatMap(
      Effect.service(PgClient.PgClient),
      (sql) => sql<Record<string, number>>`SELECT
        (SELECT extract(epoch FROM min(created_at) - ${boundaryAt})::float8 FROM billing.invoices WHERE period = 1) AS first_invoice,
        (SELECT extract(epoch FROM max(created_at) - ${boundaryAt})::float8 FROM billing.invoices WHERE period = 1) AS last_invoice,
        (SELECT extract(epoch FROM max(inserted_at) - ${boundaryAt})::float8 FROM billing.events
          WHERE type = 'charge.succeeded' AND inserted_at > ${boundaryAt}) AS last_charge_succeeded,
        (SELECT extract(epoch FROM max(inserted_at) - ${boundaryAt})::float8 FROM billing.events
          WHERE type = 'invoice.paid' AND inserted_at > ${boundaryAt}) AS last_invoice_paid`,
    ),
  );
  await database.dispose();

  const report = {
    measured_at: new Date().toISOString(),
    command: "npm run bench:billing",
    what: "N subscriptions due at one period boundary: from moving the chain's clock past it to the last invoice.paid (invoice written, chargeMany simulated and mined, indexed, settled)",
    conditions: `Ponder 0.17.7 over WebSocket, confirmations 0, anvil mining a block a second, ${cpus().length} cores, Node ${process.version}`,
    subscriptions: N,
    elapsed_seconds: Math.round(elapsed * 100) / 100,
    subscriptions_per_second: Math.round((N / elapsed) * 10) / 10,
    charges_on_chain: logs.length,
    charge_transactions: transactions.length,
    charges_per_transaction: Math.round((logs.length / Math.max(1, transactions.length)) * 10) / 10,
    gas_per_subscription: logs.length === 0 ? null : Number(gas / BigInt(logs.length)),
    timeline_seconds: timeline,
    setup_seconds: { open: created, fund: funded, authorise: authorised, first_invoices_paid: firstPaid },
    target_subscriptions_per_second: 200,
    meets_target: N / elapsed >= 200,
  };
  writeFileSync("bench/results/billing.json", `${JSON.stringify(report, null, 2)}\n`);
  console.log(JSON.stringify(report, null, 2));
  if (!report.meets_target) process.exitCode = 1;
} finally {
  await scratch.stop();
}
