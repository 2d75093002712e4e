/**
 * `npm run bench:watcher`: the deposit watcher's JSON-RPC calls per minute and its database time per
 * pass at 100, 10,000 and 100,000 open payments (WATCHER_SIZES), measured in one run on the real stack,
 * with the ratio of the largest size's calls per minute to the smallest's (the target: flat).
 *
 * The stack's one local chain sits behind a counting JSON-RPC proxy (scripts/stack/rpc-proxy.ts) that
 * tells the service's calls (this process) from the indexer's (Ponder's process) by their sockets. The
 * deposit watcher is the service's only caller of `eth_getLogs`; the service's other calls (its head,
 * the other workers) are counted beside it.
 *
 * Open payments are bulk-seeded as rows in billing.payments (the watcher reads nothing else of them), a
 * size's rows added to the last's; WATCHER_API_PAYMENTS of them are made through the API and take the
 * window's deposits. Blocks are mined on demand, one every WATCHER_BLOCK_MS, the same in every window
 * (bench/exports.ts: anvil grew to 20 GB mining a block a second for long): every fifth a plain transfer
 * of 0.01 USDC to one of the API's payments (of 10 USDC: never swept, so no relayer transaction adds a
 * block), the others empty. After a settle time, each window (WATCHER_WINDOW_S) counts the calls, the
 * watcher's passes (`billing_worker_passes_total`) and the time of its statements in pg_stat_statements
 * (those on deposit_watch and payment_transfers and those asking `watch_until >=`: every statement of
 * the watcher but the few that move a payment that received something, which it shares with other
 * workers), and times each deposit from its receipt to the watcher's record of it (the payment's `seen`
 * amount). Every deposit must be seen.
 * Writes bench/results/watcher.json.
 */
import { existsSync } from "node:fs";
import { loadavg } from "node:os";
import { PgClient } from "@effect/sql-pg";
import { Duration, Effect, ManagedRuntime, Queue, Redacted } from "effect";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  erc20Abi,
  getAddress,
  type Hex,
  http,
  parseUnits,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { usdcAbi } from "../scripts/stack/circle-usdc.ts";
import { LOCAL_FAUCET_KEY } from "../scripts/stack/local-chain.ts";
import { processLabels } from "../scripts/stack/rpc-clients.ts";
import { type RpcProxy, startRpcProxy } from "../scripts/stack/rpc-proxy.ts";
import { startScratchStack, stopOnSignal } from "../scripts/stack/scratch-stack.ts";
import { seedOpenPayments } from "../scripts/stack/seeded-payments.ts";
import { workerPasses } from "../scripts/stack/stack-metrics.ts";
import { DEPOSITS_CHANNEL } from "../service/payments/payment-store.ts";
import { benchChain } from "./local-chain-config.ts";
import { loadPgStatements, resetStatements } from "./pg-statements.ts";
import { percentiles, type SummaryRow, tenths, writeResults } from "./report.ts";
import { stackApi } from "./stack-api.ts";

const SIZES = (process.env.WATCHER_SIZES ?? "100,10000,100000").split(",").map(Number);
const WINDOW_S = Number(process.env.WATCHER_WINDOW_S ?? 60);
const SETTLE_S = Number(process.env.WATCHER_SETTLE_S ?? 10);
const BLOCK_MS = Number(process.env.WATCHER_BLOCK_MS ?? 2_000);
const API_PAYMENTS = Number(process.env.WATCHER_API_PAYMENTS ?? 20);
const DEPOSIT_EVERY = 5;
const DEPOSIT = parseUnits("0.01", 6);
const SEED_CHUNK = 10_000;
/** The target: calls per minute at the largest size over those at the smallest. */
const TARGET_RATIO = 1.1;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const perMinute = (n: number, ms: number) => tenths((n * 60_000) / ms);

if (SIZES.some((n) => !Number.isInteger(n) || n < API_PAYMENTS))
  throw new Error(`WATCHER_SIZES must be integers of at least ${API_PAYMENTS}`);
loadPgStatements();

const clients = processLabels();
const proxies: RpcProxy[] = [];
let anvilUrl = "";
console.log("starting the stack ...");
const scratch = await startScratchStack("watcher", {
  chains: [benchChain("watcher")],
  logLevel: "Error",
  rpcInFront: async (_chainId, anvil) => {
    anvilUrl = anvil.http;
    const proxy = await startRpcProxy(anvil, {}, clients.label);
    proxies.push(proxy);
    return { http: [proxy.http], ws: proxy.ws };
  },
});
const { stack } = scratch;
stopOnSignal(scratch);
clients.name("service", () => process.pid);
clients.name("indexer", () => stack.ponderPid());
const database = ManagedRuntime.make(
  PgClient.layer({ url: Redacted.make(stack.databaseUrl), maxConnections: 2 }),
);
try {
  const counting = proxies[0];
  const resolved = stack.chains[0];
  if (counting === undefined || !resolved?.escrow.address) throw new Error("no resolved chain");
  const usdc = getAddress(resolved.tokens[0]?.address as Hex);
  const chain = defineChain({
    id: resolved.id,
    name: "anvil",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [anvilUrl] } },
  });
  // The bench's own calls go to anvil itself, not through the proxy.
  const client = createPublicClient({ chain, transport: http(anvilUrl), pollingInterval: 20 });
  const anvil = (method: string, params: unknown[]) => client.request({ method, params } as never);
  const sql = <A extends object>(run: (sql: PgClient.PgClient) => Effect.Effect<ReadonlyArray<A>, unknown>) =>
    database.runPromise(Effect.flatMap(Effect.service(PgClient.PgClient), run));
  const api = stackApi(stack);
  const watcherPasses = () => workerPasses(stack, "deposit-watcher");

  // The payer: gas, and USDC from the local token's test faucet.
  const payer = privateKeyToAccount(generatePrivateKey());
  await anvil("anvil_setBalance", [payer.address, "0x56bc75e2d63100000"]);
  const faucet = createWalletClient({
    account: privateKeyToAccount(LOCAL_FAUCET_KEY),
    chain,
    transport: http(anvilUrl),
  });
  await client.waitForTransactionReceipt({
    hash: await faucet.writeContract({
      address: usdc,
      abi: usdcAbi,
      functionName: "mint",
      args: [payer.address, parseUnits("1000", 6)],
    }),
  });
  const payerWallet = createWalletClient({ account: payer, chain, transport: http(anvilUrl) });

  const made: Array<{ id: string; address: Hex }> = [];
  for (let i = 0; i < API_PAYMENTS; i++) {
    const payment = await api("/v1/payments", { amount_decimal: "10", expires_in: 604_800 });
    made.push({ id: payment.id as string, address: payment.address as Hex });
  }
  const [merchantChain] = await sql<{ payee: string; operator: string }>(
    (s) => s`SELECT payee_address AS payee, operator_address AS operator
      FROM billing.payments WHERE id = ${made[0]?.id ?? ""}`,
  );
  if (merchantChain === undefined) throw new Error("the API's payment is not in the database");

  let seeded = 0;
  /** Bulk-seeds open payments (a week to expiry, in chain time) up to `total` with the API's ones. */
  const seedUpTo = async (total: number) => {
    const head = await client.getBlock();
    const expires = Number(head.timestamp) + 604_800;
    const salt = crypto.randomUUID();
    while (seeded + API_PAYMENTS < total) {
      const count = Math.min(SEED_CHUNK, total - API_PAYMENTS - seeded);
      await database.runPromise(
        seedOpenPayments({
          merchantId: stack.devMerchant.merchantId,
          chainId: resolved.id,
          token: usdc,
          payee: merchantChain.payee,
          operator: merchantChain.operator,
          amount: 10_000_000n,
          expiresAt: expires,
          createdBlock: head.number,
          first: seeded + 1,
          count,
          salt,
        }),
      );
      seeded += count;
    }
    await sql((s) => s`VACUUM (ANALYZE) billing.payments`);
  };

  /**
   * Deposits as the watcher records them: a payment's `seen` (what arrived and waits at its address: it is
   * never swept here) reaching what was sent to it, read when the watcher notifies or every 250 ms.
   */
  const deposits = new Map<Hex, { payment: string; total: bigint; sent: number; seen?: number }>();
  const sentTo = new Map<string, bigint>();
  database.runFork(
    Effect.scoped(
      Effect.gen(function* () {
        const s = yield* PgClient.PgClient;
        const wakeUps = yield* s.listen(DEPOSITS_CHANNEL);
        for (;;) {
          const waiting = [...deposits.values()].filter((d) => d.seen === undefined);
          if (waiting.length > 0) {
            const rows = yield* s<{ id: string; seen: string }>`SELECT id, seen::text AS seen
              FROM billing.payments WHERE id = ANY (${[...new Set(waiting.map((d) => d.payment))]}::text[])`;
            const now = performance.now();
            const seen = new Map(rows.map((row) => [row.id, BigInt(row.seen)]));
            for (const deposit of waiting)
              if ((seen.get(deposit.payment) ?? 0n) >= deposit.total) deposit.seen = now;
          }
          yield* Queue.take(wakeUps).pipe(Effect.timeoutOption(Duration.millis(250)));
          yield* Queue.clear(wakeUps);
        }
      }),
    ),
  );

  let block = 0;
  /** One block every BLOCK_MS for `ms`: a deposit every DEPOSIT_EVERY-th, empty otherwise. */
  const mineFor = async (ms: number, record: boolean) => {
    const hashes: Hex[] = [];
    const until = performance.now() + ms;
    let next = performance.now();
    while (next < until) {
      block += 1;
      if (block % DEPOSIT_EVERY === 0) {
        const to = made[(block / DEPOSIT_EVERY) % made.length] as { id: string; address: Hex };
        const hash = await payerWallet.writeContract({
          address: usdc,
          abi: erc20Abi,
          functionName: "transfer",
          args: [to.address, DEPOSIT],
          gas: 100_000n,
        });
        const receipt = await client.waitForTransactionReceipt({ hash });
        if (receipt.status !== "success") throw new Error(`deposit ${hash} reverted`);
        const total = (sentTo.get(to.id) ?? 0n) + DEPOSIT;
        sentTo.set(to.id, total);
        if (record) deposits.set(hash, { payment: to.id, total, sent: performance.now() });
        hashes.push(hash);
      } else await anvil("evm_mine", []);
      next += BLOCK_MS;
      await sleep(Math.max(0, next - performance.now()));
    }
    return hashes;
  };

  // WATCHER_MEASURE_AFTER=<path>: the windows wait until the path exists (as bench:exports).
  const gate = process.env.WATCHER_MEASURE_AFTER;

  const windows = [];
  for (const size of SIZES) {
    console.log(`${size.toLocaleString("en")} open payments: seeding ...`);
    await seedUpTo(size);
    const [open] = await sql<{ n: number }>(
      (s) => s`SELECT count(*)::int AS n FROM billing.payments
        WHERE chain_id = ${resolved.id} AND status IN ('requires_payment', 'processing')`,
    );
    if (open?.n !== size) throw new Error(`${open?.n} open payments, not ${size}`);
    if (gate !== undefined) {
      console.log(`waiting for ${gate} before measuring ...`);
      while (!existsSync(gate)) await sleep(2_000);
    }
    await mineFor(SETTLE_S * 1000, false);
    console.log(`measuring for ${WINDOW_S} s ...`);
    const loadBefore = loadavg();
    await database.runPromise(resetStatements);
    const passesBefore = await watcherPasses();
    const headBefore = await client.getBlockNumber();
    counting.resetCounts();
    const started = performance.now();
    const sent = await mineFor(WINDOW_S * 1000, true);
    const elapsed = performance.now() - started;
    const counts = counting.counts();
    const passes = (await watcherPasses()) - passesBefore;
    const blocks = Number((await client.getBlockNumber()) - headBefore);
    const [statements] = await sql<{ calls: number; ms: number }>(
      (s) => s`SELECT coalesce(sum(calls), 0)::int AS calls,
          coalesce(sum(total_exec_time), 0)::float8 AS ms FROM pg_stat_statements
        WHERE query ~ '(watch_until >=|deposit_watch|payment_transfers)'`,
    );
    const top = await sql<{ calls: number; ms: number; query: string }>(
      (s) => s`SELECT calls::int, round(total_exec_time::numeric, 1)::float8 AS ms,
          left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 100) AS query FROM pg_stat_statements
        WHERE query ~ '(watch_until >=|deposit_watch|payment_transfers)'
        ORDER BY total_exec_time DESC LIMIT 8`,
    );
    // Every deposit of the window is seen (within 30 s of its receipt).
    const deadline = performance.now() + 30_000;
    while (sent.some((hash) => deposits.get(hash)?.seen === undefined) && performance.now() < deadline)
      await sleep(100);
    const unseen = sent.filter((hash) => deposits.get(hash)?.seen === undefined);
    if (unseen.length > 0) throw new Error(`${unseen.length} of ${sent.length} deposits never seen`);
    const service = counts.byClientMethod.service ?? {};
    const indexer = counts.byClientMethod.indexer ?? {};
    const sum = (methods: Readonly<Record<string, number>>) =>
      Object.values(methods).reduce((a, b) => a + b, 0);
    const result = {
      open_payments: size,
      seconds: tenths(elapsed / 1000),
      blocks,
      deposits: sent.length,
      deposit_seen_ms: percentiles(
        sent.map((hash) => (deposits.get(hash)?.seen ?? 0) - (deposits.get(hash)?.sent ?? 0)),
      ),
      watcher_get_logs_per_minute: perMinute(service.eth_getLogs ?? 0, elapsed),
      service_calls_per_minute: perMinute(sum(service), elapsed),
      service_calls_per_minute_by_method: Object.fromEntries(
        Object.entries(service).map(([method, n]) => [method, perMinute(n, elapsed)]),
      ),
      indexer_calls_per_minute: perMinute(sum(indexer), elapsed),
      other_calls: sum(counts.byClientMethod.other ?? {}),
      watcher_passes: passes,
      watcher_statements: statements?.calls ?? 0,
      watcher_db_ms_per_pass: tenths(((statements?.ms ?? 0) / Math.max(passes, 1)) * 10) / 10,
      watcher_costliest_statements: top,
      load_average_before: loadBefore.map((l) => tenths(l)),
    };
    console.log(JSON.stringify(result, null, 2));
    windows.push(result);
  }

  const first = windows[0];
  const last = windows[windows.length - 1];
  if (first === undefined || last === undefined) throw new Error("no window measured");
  const ratio = (a: number, b: number) => Math.round((a / Math.max(b, 1e-9)) * 1000) / 1000;
  const calls = ratio(last.watcher_get_logs_per_minute, first.watcher_get_logs_per_minute);
  const serviceCalls = ratio(last.service_calls_per_minute, first.service_calls_per_minute);
  const at = (w: typeof first) => w.open_payments.toLocaleString("en");
  const summary: SummaryRow[] = [
    {
      what: `deposit watcher: eth_getLogs per minute at ${at(last)} open payments (a block every ${BLOCK_MS / 1000} s)`,
      figure: last.watcher_get_logs_per_minute,
      unit: "calls/min",
      baseline: first.watcher_get_logs_per_minute,
      baseline_what: `at ${at(first)} open payments, same run`,
      ratio: calls,
      target: `ratio ≤ ${TARGET_RATIO}`,
      meets_target: calls <= TARGET_RATIO,
    },
    {
      what: `the service's JSON-RPC calls per minute at ${at(last)} open payments`,
      figure: last.service_calls_per_minute,
      unit: "calls/min",
      baseline: first.service_calls_per_minute,
      baseline_what: `at ${at(first)} open payments, same run`,
      ratio: serviceCalls,
      target: `ratio ≤ ${TARGET_RATIO}`,
      meets_target: serviceCalls <= TARGET_RATIO,
    },
    {
      what: `deposit watcher: database time per pass at ${at(last)} open payments`,
      figure: last.watcher_db_ms_per_pass,
      unit: "ms",
      baseline: first.watcher_db_ms_per_pass,
      baseline_what: `at ${at(first)} open payments, same run`,
      ratio: ratio(last.watcher_db_ms_per_pass, first.watcher_db_ms_per_pass),
      target: null,
      meets_target: null,
    },
  ];
  writeResults("watcher", "npm run bench:watcher", summary, {
    what: "The deposit watcher's RPC calls per minute and database time per pass as open payments grow",
    conditions: `scratch stack on one anvil chain behind a counting proxy; a block every ${BLOCK_MS} ms mined on demand, a deposit every ${DEPOSIT_EVERY}th; ${SETTLE_S} s to settle, then ${WINDOW_S} s measured per size`,
    ratio_get_logs_per_minute: calls,
    ratio_service_calls_per_minute: serviceCalls,
    windows,
  });
  console.log(
    `eth_getLogs/min ratio ${at(last)} / ${at(first)}: ${calls}; all the service's calls: ${serviceCalls}`,
  );
} finally {
  await database.dispose();
  await scratch.stop();
  for (const proxy of proxies) await proxy.stop();
}
