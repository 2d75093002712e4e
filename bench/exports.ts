/**
 * `npm run bench:exports`: a ledger of N movements (EXPORT_ROWS, default 100,000) downloaded in one
 * request, as CSV and as JSON, from the real stack: rows against the escrow's logs, time per 10,000 rows,
 * and the process's memory while it streams.
 *
 * Bulk-seeded on chain, as the issue allows, not through the API: CUSTOMERS wallets approve the escrow,
 * each signs N / CUSTOMERS mandates (EIP-712 Terms, no hold) to the dev merchant's payout address with
 * the bench's own operator, which authorises them (`authorizeMany`) and charges each once (`chargeMany`),
 * BATCH a transaction. The fact relay records them as the merchant's chain-origin mandates and charges and
 * writes one balance transaction per `Charged` log. The service runs in this process (the scratch stack),
 * so its memory is this process's.
 *
 * Measured, with nothing else running in the service: `GET /v1/balance_transactions?format=csv` (and
 * `json`) read to the end as a stream (lines counted, nothing kept), RSS sampled every 10 ms: the peak
 * over the download against RSS just before it, for the whole ledger and for its first tenth (a flat
 * memory gives the same growth for both). Time per 10,000 rows beside the same rows read by one
 * `SELECT` (the bare read, buffered by the driver): the price of paging and rendering.
 * Writes bench/results/exports.json.
 */
import { existsSync } from "node:fs";
import { loadavg } from "node:os";
import { PgClient } from "@effect/sql-pg";
import { Effect, ManagedRuntime, Redacted } from "effect";
import { request } from "undici";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  erc20Abi,
  type Hex,
  http,
  parseUnits,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { MandateEscrowAbi } from "../abis/MandateEscrow.ts";
import { TestFaucetAbi, TestFaucetBytecode } from "../abis/TestFaucet.ts";
import { addLocalUsdcMinter, LOCAL_DEPLOYER_KEY } from "../scripts/stack/local-chain.ts";
import { startScratchStack, stopOnSignal } from "../scripts/stack/scratch-stack.ts";
import { TERMS_TYPES } from "../service/mandates/terms.ts";
import { mandateTerms, type Terms } from "../test/contract/harness.ts";
import { benchChain } from "./local-chain-config.ts";
import { ratioTo, type SummaryRow, tenths, writeResults } from "./report.ts";

const N = Number(process.env.EXPORT_ROWS ?? 100_000);
const CUSTOMERS = Number(process.env.EXPORT_CUSTOMERS ?? 100);
const BATCH = 250;
const AMOUNT = parseUnits("0.01", 6);
const TIMEOUT_MS = Number(process.env.EXPORT_TIMEOUT_S ?? 1_800) * 1000;

const seconds = (since: number) => Math.round((performance.now() - since) / 10) / 100;
const mb = (bytes: number) => Math.round(bytes / 104_857.6) / 10;

console.log("starting the stack ...");
const scratch = await startScratchStack("exports", { chains: [benchChain("exports")], flatBlockCost: true });
const { stack } = scratch;
stopOnSignal(scratch);
try {
  const resolved = stack.chains[0];
  if (!resolved?.rpc || !resolved.escrow.address) throw new Error("no resolved chain");
  const escrow = resolved.escrow.address as Hex;
  const usdc = resolved.tokens[0]?.address as Hex;
  const rpcUrl = resolved.rpc.http[0] as string;
  const chain = defineChain({
    id: resolved.id,
    name: "anvil",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  });
  const client = createPublicClient({ chain, transport: http(rpcUrl), pollingInterval: 100 });
  const anvil = (method: string, params: unknown[]) => client.request({ method, params } as never);
  /** Mines blocks until every one of `hashes` is in one; a reverted one fails the bench. */
  const mined = async (hashes: readonly Hex[]) => {
    const pending = new Set(hashes);
    while (pending.size > 0) {
      await anvil("evm_mine", []);
      for (const hash of [...pending]) {
        const receipt = await client.getTransactionReceipt({ hash }).catch(() => undefined);
        if (receipt === undefined) continue;
        if (receipt.status !== "success") throw new Error(`${hash} reverted`);
        pending.delete(hash);
      }
    }
  };
  const key = stack.devMerchant.apiKey;
  const api = async (path: string) => {
    const response = await fetch(`${stack.apiUrl}${path}`, { headers: { authorization: `Bearer ${key}` } });
    if (!response.ok) throw new Error(`${path}: ${response.status} ${await response.text()}`);
    return response.json() as Promise<Record<string, unknown>>;
  };
  const database = ManagedRuntime.make(
    PgClient.layer({ url: Redacted.make(stack.databaseUrl), maxConnections: 2 }),
  );
  const sql = <A extends object>(run: (sql: PgClient.PgClient) => Effect.Effect<ReadonlyArray<A>, unknown>) =>
    database.runPromise(Effect.flatMap(Effect.service(PgClient.PgClient), run));

  const payee = (
    (await api("/v1/merchant/chains")).data as Array<{ chain: number; payout_address: Hex }>
  ).find((c) => c.chain === resolved.id)?.payout_address;
  if (payee === undefined) throw new Error("the dev merchant has no payout address on the bench chain");

  await anvil("evm_setBlockGasLimit", ["0x3b9aca00"]);
  const setupStarted = performance.now();

  // Customers with gas, USDC (from a faucet made a minter) and the escrow approved.
  const deployer = privateKeyToAccount(LOCAL_DEPLOYER_KEY);
  const deployerWallet = createWalletClient({ account: deployer, chain, transport: http(rpcUrl) });
  const faucet = (
    await client.waitForTransactionReceipt({
      hash: await deployerWallet.deployContract({ abi: TestFaucetAbi, bytecode: TestFaucetBytecode }),
    })
  ).contractAddress as Hex;
  await addLocalUsdcMinter(rpcUrl, resolved.id, usdc, faucet);
  const customers = Array.from({ length: CUSTOMERS }, () => privateKeyToAccount(generatePrivateKey()));
  const operator = privateKeyToAccount(generatePrivateKey());
  for (const account of [...customers, operator])
    await anvil("anvil_setBalance", [account.address, "0x56bc75e2d63100000"]);
  await client.waitForTransactionReceipt({
    hash: await deployerWallet.writeContract({
      address: faucet,
      abi: TestFaucetAbi,
      functionName: "mintEach",
      args: [usdc, customers.map((c) => c.address), AMOUNT * BigInt(Math.ceil(N / CUSTOMERS) + 1)],
      gas: BigInt(CUSTOMERS) * 60_000n,
    }),
  });
  const approvals = await Promise.all(
    customers.map((customer) =>
      createWalletClient({ account: customer, chain, transport: http(rpcUrl) }).writeContract({
        address: usdc,
        abi: erc20Abi,
        functionName: "approve",
        args: [escrow, 2n ** 256n - 1n],
        gas: 100_000n,
      }),
    ),
  );
  for (const hash of approvals) await client.waitForTransactionReceipt({ hash });

  // N mandates, signed by their customers, authorised and charged by the bench's operator.
  const now = Number((await client.getBlock()).timestamp);
  const perCustomer = Math.ceil(N / CUSTOMERS);
  const signed: Array<{ terms: Terms; signature: Hex }> = [];
  for (let i = 0; i < N; i++) {
    const customer = customers[i % CUSTOMERS] as (typeof customers)[number];
    const terms = mandateTerms(
      { usdc, clock: { now } },
      { customer: customer.address, payee, operator: operator.address },
      BigInt(Math.floor(i / CUSTOMERS) + 1),
      { cap: AMOUNT },
    );
    const signature = await customer.signTypedData({
      domain: { name: "MandateEscrow", version: "1", chainId: resolved.id, verifyingContract: escrow },
      types: TERMS_TYPES,
      primaryType: "Terms",
      message: terms,
    });
    signed.push({ terms, signature });
  }
  console.log(`${N} mandates signed (${perCustomer} per customer) in ${seconds(setupStarted)} s`);
  // From here blocks of 1,000,000,000 gas are mined when the bench asks (`mined`): anvil 1.7.1 keeps
  // growing by about its state's size with every block, and a block a second over the set-up's minutes
  // was OOM-killed at 20 GB (the billing bench met the same: bench/billing.ts).
  await anvil("evm_setAutomine", [false]);
  const operatorWallet = createWalletClient({ account: operator, chain, transport: http(rpcUrl) });
  let nonce = await client.getTransactionCount({ address: operator.address, blockTag: "pending" });
  const fees = await client.estimateFeesPerGas();
  const send = (functionName: "authorizeMany" | "chargeMany", args: readonly unknown[], gas: bigint) =>
    operatorWallet.writeContract({
      address: escrow,
      abi: MandateEscrowAbi,
      functionName,
      args: args as never,
      nonce: nonce++,
      gas,
      maxFeePerGas: fees.maxFeePerGas * 4n,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    });
  const sent: Hex[] = [];
  for (let i = 0; i < N; i += BATCH) {
    const batch = signed.slice(i, i + BATCH);
    sent.push(
      await send(
        "authorizeMany",
        [
          batch.map((s) => s.terms),
          batch.map((s) => s.signature),
          batch.map(() => ({
            value: 0n,
            deadline: 0n,
            v: 0,
            r: `0x${"0".repeat(64)}`,
            s: `0x${"0".repeat(64)}`,
          })),
        ],
        BigInt(batch.length) * 150_000n,
      ),
    );
  }
  await mined(sent);
  // Charged a tenth at a time, a minute of chain time apart: the first tenth is a `created` range of its own.
  const tenthSize = Math.ceil(N / 10 / BATCH) * BATCH;
  for (let tenth = 0; tenth * tenthSize < N; tenth++) {
    const charges: Hex[] = [];
    for (let i = tenth * tenthSize; i < Math.min(N, (tenth + 1) * tenthSize); i += BATCH) {
      const batch = signed.slice(i, i + BATCH);
      charges.push(
        await send(
          "chargeMany",
          [batch.map((s) => s.terms.mandateId), batch.map(() => AMOUNT)],
          BigInt(batch.length) * 120_000n,
        ),
      );
    }
    await mined(charges);
    await anvil("evm_increaseTime", [60]);
  }
  console.log(`${N} mandates authorised and charged on chain in ${seconds(setupStarted)} s`);

  const { merchantId } = stack.devMerchant;
  const recorded = async () =>
    (
      await sql<{ n: number }>(
        (s) =>
          s`SELECT count(*)::int AS n FROM billing.balance_transactions WHERE merchant_id = ${merchantId} AND type = 'charge'`,
      )
    )[0]?.n ?? 0;
  for (let count = await recorded(); count < N; count = await recorded()) {
    if (performance.now() - setupStarted > TIMEOUT_MS) throw new Error(`only ${count} of ${N} in the ledger`);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
  const setupSeconds = seconds(setupStarted);
  console.log(`${N} balance transactions in the ledger after ${setupSeconds} s`);
  await sql((s) => s`VACUUM (ANALYZE) billing.balance_transactions, billing.ledger_entries`);

  // EXPORT_MEASURE_AFTER=<path>: the downloads wait until the path exists (seeding overlaps other work
  // on a shared machine; the measurement should not).
  const gate = process.env.EXPORT_MEASURE_AFTER;
  if (gate !== undefined) {
    console.log(`waiting for ${gate} before measuring ...`);
    while (!existsSync(gate)) await new Promise((resolve) => setTimeout(resolve, 2_000));
  }
  const loadBefore = loadavg();

  /** One download read to its end as a stream: rows (lines or objects), bytes, seconds, RSS growth. */
  const download = async (query: string, format: "csv" | "json") => {
    const before = process.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 10);
    const started = performance.now();
    const response = await request(`${stack.apiUrl}/v1/balance_transactions?format=${format}${query}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    if (response.statusCode !== 200) throw new Error(`download: ${response.statusCode}`);
    let bytes = 0;
    let marks = 0;
    let firstByte = 0;
    const mark = format === "csv" ? "\r\n" : '{"id":"txn_';
    let tail = "";
    for await (const chunk of response.body) {
      if (firstByte === 0) firstByte = performance.now() - started;
      const text = tail + (chunk as Buffer).toString("utf8");
      bytes += (chunk as Buffer).length;
      marks += text.split(mark).length - 1;
      tail = text.slice(-(mark.length - 1));
      peak = Math.max(peak, process.memoryUsage().rss);
    }
    const elapsed = (performance.now() - started) / 1000;
    clearInterval(sampler);
    return {
      rows: format === "csv" ? marks - 1 : marks,
      bytes,
      seconds: tenths(elapsed * 10) / 10,
      first_byte_ms: tenths(firstByte),
      rss_before_mb: mb(before),
      rss_growth_mb: mb(peak - before),
    };
  };

  // The first tenth of the ledger (its own minute of chain time), for the memory comparison.
  const [tenth] = await sql<{ created: number }>(
    (s) => s`SELECT created::float8 AS created FROM billing.balance_transactions
      WHERE merchant_id = ${merchantId} ORDER BY created, seq OFFSET ${tenthSize} LIMIT 1`,
  );
  const firstTenth = tenth ? await download(`&created_to=${tenth.created}`, "csv") : undefined;
  const csv = await download("", "csv");
  const json = await download("", "json");
  const bareStarted = performance.now();
  const bare = await sql(
    (
      s,
    ) => s`SELECT t.*, (SELECT json_agg(e) FROM billing.ledger_entries e WHERE e.balance_transaction_id = t.id) AS entries
      FROM billing.balance_transactions t WHERE t.merchant_id = ${merchantId} ORDER BY t.created, t.seq`,
  );
  const bareSeconds = (performance.now() - bareStarted) / 1000;
  const bareRows = bare.length;

  console.log(JSON.stringify({ csv, json, firstTenth, bareRows, bareSeconds }));
  // The chain's count, read after the downloads (its logs are held in memory here); a block holds up to
  // ~9,000 of them, far above viem's default limit on a response's size.
  const logsClient = createPublicClient({ chain, transport: http(rpcUrl, { maxResponseBodySize: 2 ** 30 }) });
  const head = await client.getBlockNumber();
  let escrowLogs = 0;
  for (let from = 0n; from <= head; from += 500n) {
    const logs = await logsClient.getContractEvents({
      address: escrow,
      abi: MandateEscrowAbi,
      eventName: "Charged",
      fromBlock: from,
      toBlock: from + 499n > head ? head : from + 499n,
    });
    escrowLogs += logs.filter((log) => String(log.args.payee).toLowerCase() === payee.toLowerCase()).length;
  }
  const per10k = (s: number, rows: number) => tenths((s * 10_000 * 1000) / Math.max(rows, 1));
  const summary: SummaryRow[] = [
    {
      what: `balance transactions CSV download, ${csv.rows.toLocaleString("en")} rows: ms per 10,000 rows`,
      figure: per10k(csv.seconds, csv.rows),
      unit: "ms",
      baseline: per10k(bareSeconds, bareRows),
      baseline_what: "the same rows and entries read by one SELECT (buffered), same run",
      ratio: ratioTo(csv.seconds / Math.max(csv.rows, 1), bareSeconds / Math.max(bareRows, 1)),
      target: null,
      meets_target: null,
    },
    {
      what: "RSS growth while downloading the whole ledger against its first tenth",
      figure: tenths(csv.rss_growth_mb),
      unit: "MB",
      baseline: firstTenth ? tenths(firstTenth.rss_growth_mb) : null,
      baseline_what: "the first tenth of the rows, same run",
      ratio: firstTenth ? ratioTo(csv.rss_growth_mb, firstTenth.rss_growth_mb) : null,
      // Memory that does not grow with the rows; 16 MB is the garbage collector's slack.
      target: "ratio ≤ 2, or ≤ 16 MB",
      meets_target: firstTenth ? csv.rss_growth_mb <= Math.max(2 * firstTenth.rss_growth_mb, 16) : null,
    },
  ];
  writeResults("exports", "npm run bench:exports", summary, {
    what: "A ledger of N movements downloaded in one request each (CSV, then JSON), read as a stream",
    conditions:
      "scratch stack on one anvil chain (confirmations 0); the service runs in the bench's process, so RSS is the service's plus the bench's (which holds nothing of the downloads)",
    movements: N,
    escrow_charged_logs_to_payee: escrowLogs,
    rows_match_escrow_logs: csv.rows === escrowLogs && json.rows === escrowLogs,
    setup_seconds: setupSeconds,
    csv,
    json,
    first_tenth_csv: firstTenth,
    bare_select: { rows: bareRows, seconds: tenths(bareSeconds * 10) / 10 },
    load_average_before_downloads: loadBefore.map((l) => tenths(l)),
  });
  console.log(JSON.stringify({ escrowLogs, csv, json, firstTenth, bareRows, bareSeconds }, null, 2));
  await database.dispose();
  if (csv.rows !== escrowLogs || json.rows !== escrowLogs)
    throw new Error(`rows ${csv.rows} (CSV), ${json.rows} (JSON) against ${escrowLogs} escrow logs`);
} finally {
  await scratch.stop();
}
