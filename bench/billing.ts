/**
 * `npm run bench:billing`: N subscriptions due at one period boundary, billed end to end (invoice
 * written, batch charge mined, indexed, `invoice.paid`), and the gas each subscription cost on chain.
 *
 * Starts the real stack on fresh ports (embedded Postgres, anvil, Ponder, the service) and sets up N
 * subscriptions the way merchants and customers do: the API opens them, each customer (a fresh wallet
 * holding test USDC) signs terms and permit through the hosted page's JSON API, and the service's relayer
 * sends the authorisations. The bench's own signing (keys, EIP-712 signatures) runs in worker
 * threads (billing-signer.ts), so the main thread, which runs the service, does only the service's work.
 * anvil mines a block a second with a large gas limit during the set-up: one block per transaction would
 * measure Ponder's RPC rate limit (about 20 requests a second), not billing. Once every first invoice is
 * paid, the chain switches to Base mainnet's blocks (BLOCK_SECONDS, BLOCK_GAS_LIMIT), the chain's clock
 * moves one month and the measured phase starts: from the
 * database's clock just before the move to the last `invoice.paid` event's insert time (the bench's
 * polling only notices the end; it is not counted). N = BILLING_SUBSCRIPTIONS (default 10,000). Writes
 * bench/results/billing.json (billing-<N>.json for another N, compared per subscription with a 10,000
 * run this command makes first; see `tenThousandJustBefore`).
 */

import { PgClient } from "@effect/sql-pg";
import { Effect, ManagedRuntime, Redacted } from "effect";
import { Pool } from "undici";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  type Hex,
  http,
  parseEventLogs,
  parseUnits,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { MandateEscrowAbi } from "../abis/MandateEscrow.ts";
import { TestFaucetAbi, TestFaucetBytecode } from "../abis/TestFaucet.ts";
import { addLocalUsdcMinter, LOCAL_DEPLOYER_KEY } from "../scripts/stack/local-chain.ts";
import { inPool } from "../scripts/stack/pool.ts";
import { startScratchStack, stopOnSignal } from "../scripts/stack/scratch-stack.ts";
import type { PageTypedData } from "../test/contract/harness.ts";
import { startSigners } from "./billing-signer.ts";
import { runInChild } from "./child-run.ts";
import { startCpuProfile } from "./cpu-profiler.ts";
import { benchChain } from "./local-chain-config.ts";
import { pgStatementsLoaded, printStatements, resetStatements } from "./pg-statements.ts";
import { cpuBetween, processCpuSeconds, processMemoryMegabytes, threadCpuSeconds } from "./process-cpu.ts";
import { AGAINST_TEN_THOUSAND, type SummaryRow, writeResults } from "./report.ts";

const N = Number(process.env.BILLING_SUBSCRIPTIONS ?? 10_000);
/**
 * Customers (and subscriptions being opened) at once. At 32 the two cores were about an eighth idle
 * during the authorisations, each customer waiting on its requests; at 64 they are busy (20.6 s against
 * 23.6 s for 4,000); 128 was no faster.
 */
const CONCURRENCY = Number(process.env.BILLING_CONCURRENCY ?? 64);
/** Worker threads making the customers' keys and signing for them. */
const SIGNERS = Number(process.env.BILLING_SIGNERS ?? 2);
/**
 * BILLING_CPU_PROFILE=<file>: a V8 CPU profile of this process's main thread (the service and the
 * bench's HTTP client) over the authorisations, for `node bench/cpu-profile.ts`.
 */
const CPU_PROFILE = process.env.BILLING_CPU_PROFILE;
/**
 * Billed/s over the chain's capacity in charges per second, computed from the same run (block gas limit ÷
 * gas per subscription ÷ block time), at every size (issue 48). The set-up is measured with no target.
 */
const TARGET_OF_CAPACITY = 0.5;
const MONTH = 31 * 86_400;
/**
 * The chain the measured phase models: Base mainnet, a block every 2 s with a 140,000,000 gas limit
 * (docs.base.org, "Block Building", 2025). The set-up's faucet and authorisations run on blocks a
 * second apart with 1,000,000,000 gas, so that minting 10,000 wallets is not what the set-up measures.
 */
const BLOCK_SECONDS = Number(process.env.BILLING_BLOCK_SECONDS ?? 2);
/**
 * The set-up's block interval (BILLING_SETUP_BLOCK_SECONDS). On plain anvil, whose memory grew by about
 * its state's size with every block, 100,000 due needed 10 s blocks to fit a 23 GB machine; on the
 * chain with flat block costs (`flatBlockCost` below) a second at every size.
 */
const SETUP_BLOCK_SECONDS = Number(process.env.BILLING_SETUP_BLOCK_SECONDS ?? 1);
const BLOCK_GAS_LIMIT = BigInt(process.env.BILLING_BLOCK_GAS_LIMIT ?? 140_000_000);
const PHASE_TIMEOUT_MS = Number(process.env.BILLING_PHASE_TIMEOUT_S ?? 1_800) * 1000;

const seconds = (since: number) => Math.round((performance.now() - since) / 10) / 100;
const thousandths = (n: number) => Math.round(n * 1_000) / 1_000;

/**
 * CPU per authorisation of the set-up's authorisation phase (from the first `/terms` to the last
 * `/signatures` answered), by process and, in this one, by thread: what bounds the set-up on two cores.
 */
const authorisationCpuMs = (cpu: Record<string, number>, threads: Record<string, number>) => {
  const ms = (seconds: number | undefined) => thousandths(((seconds ?? 0) * 1_000) / N);
  const helpers = Object.entries(threads)
    .filter(([name]) => name !== "MainThread" && name !== "WorkerThread")
    .reduce((sum, [, seconds]) => sum + seconds, 0);
  return {
    total: ms(Object.values(cpu).reduce((sum, seconds) => sum + seconds, 0)),
    service_and_bench_client: ms(threads.MainThread),
    customers_signing: ms(threads.WorkerThread),
    v8_helpers: ms(helpers),
    postgres: ms(cpu.postgres),
    ponder: ms(cpu.ponder),
    anvil: ms(cpu.anvil),
  };
};

/**
 * What billing one subscription at the boundary costs, measured so that other work on the machine
 * moves it little: `cpu_ms`, the CPU time over the measured phase of the processes that do the
 * product's work (this process, i.e. the service and the bench's end polling; Postgres; Ponder), and
 * Postgres's CPU for the VACUUM (ANALYZE) the phase's writes call for, run right after it, per
 * subscription. anvil's time is the chain's, not ours, and is left out. Beside it the wall time per
 * subscription, and the same once the chain's pace is taken out: `chain_seconds` is the block interval
 * times the blocks the phase's charges need at the block gas limit (the least time the chain itself
 * takes to carry them).
 */
const costPerSubscription = (
  cpu: Record<string, number>,
  maintenanceSeconds: number,
  elapsed: number,
  gas: bigint,
) => {
  const ours = (cpu.self ?? 0) + (cpu.postgres ?? 0) + (cpu.ponder ?? 0) + maintenanceSeconds;
  const chainSeconds = Number((gas + BLOCK_GAS_LIMIT - 1n) / BLOCK_GAS_LIMIT) * BLOCK_SECONDS;
  return {
    cpu_ms: thousandths((ours * 1_000) / N),
    cpu_ms_by_process: {
      service: thousandths(((cpu.self ?? 0) * 1_000) / N),
      postgres: thousandths(((cpu.postgres ?? 0) * 1_000) / N),
      postgres_maintenance: thousandths((maintenanceSeconds * 1_000) / N),
      ponder: thousandths(((cpu.ponder ?? 0) * 1_000) / N),
      anvil: thousandths(((cpu.anvil ?? 0) * 1_000) / N),
    },
    wall_ms: thousandths((elapsed * 1_000) / N),
    chain_seconds: chainSeconds,
    wall_ms_beyond_chain: thousandths((Math.max(0, elapsed - chainSeconds) * 1_000) / N),
  };
};

// Postgres's own page cache is 128 MB unless set: at 100,000 due the boundary's working set (invoices,
// charges, events, subscriptions, mandates and their indexes) outgrows it, and every page read past it is
// a copy from the kernel's cache. A database in service is given a quarter of its machine or so; 1 GB
// (of this machine's 23.5 GB) stands for that at every size of the bench.
//
// Postgres checkpoints whenever about half of `max_wal_size` (1 GB unless set) of WAL has been written
// since the last one, and the first change to each page after a checkpoint writes the whole page to
// the WAL again. A boundary writes ~26 KB of WAL per subscription, so at 100,000 due the default made
// ten checkpoints in the measured phase, each followed by a wave of full-page images (5.8 per
// subscription against 0.8 at 10,000), which made yet more WAL: part of what grew with N (autovacuum
// inside the phase was the other part; see below). Postgres's guidance is a `max_wal_size` large enough that checkpoints come from
// `checkpoint_timeout`; 16 GB stands for that (docs/operations.md, "Postgres for billing boundaries", sizes it for a deployment).
const tuned: Record<string, string> = { shared_buffers: "1GB", max_wal_size: "16GB" };
for (const [setting, value] of Object.entries(tuned))
  if (!process.env.POSTGRES_FLAGS?.includes(setting))
    process.env.POSTGRES_FLAGS = `${process.env.POSTGRES_FLAGS ?? ""} -c ${setting}=${value}`.trim();
/**
 * At another size than 10,000, the cost per subscription is set beside a 10,000 run that this command
 * makes first, in a child process (it writes billing.json, as `npm run bench:billing` does): the
 * figure's baseline from the same run. Set beside the newest earlier 10,000 run instead, the ratio
 * measured the machine as much as the code: this machine's speed moved by about a third between
 * stretches of one boot, and one 100,000 run came out at 0.98×, 1.10× or 1.26× depending on which 10,000
 * run it was set beside (docs/performance.md at 64b9879). `BILLING_BASELINE=0` skips it (no baseline
 * then).
 */
const tenThousandJustBefore = async (): Promise<{ cpu_ms: number; measured_at: string } | undefined> => {
  if (N === 10_000 || process.env.BILLING_BASELINE === "0") return undefined;
  console.log("the 10,000 baseline first (BILLING_BASELINE=0 skips it) ...");
  const ten = await runInChild<{ measured_at: string; cost_per_subscription: { cpu_ms: number } }>(
    import.meta.filename,
    { BILLING_SUBSCRIPTIONS: "10000" },
    "bench/results/billing.json",
  );
  return { cpu_ms: ten.cost_per_subscription.cpu_ms, measured_at: ten.measured_at };
};
const tenThousand = await tenThousandJustBefore();

console.log("starting the stack ...");
const scratch = await startScratchStack("billing", {
  chains: [benchChain("billing")],
  // A chain whose blocks cost the same at every size, as a real node's (scripts/stack/anvil.ts): plain
  // anvil spent 1.2 ms of CPU per subscription at 100,000 due against 0.43 at 10,000, recomputing its
  // whole state trie every block, and kept a copy of the state per block (21.7 GB at 100,000 due).
  // BILLING_FLAT=0 runs on plain anvil, for comparison.
  flatBlockCost: process.env.BILLING_FLAT !== "0",
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
const signers = startSigners(SIGNERS);
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
  const client = createPublicClient({ chain, transport: http(resolved.rpc.http[0]), pollingInterval: 100 });
  const anvil = (method: string, params: unknown[]) => client.request({ method, params } as never);
  const key = stack.devMerchant.apiKey;
  // The bench's own HTTP client (opening subscriptions, the customers' page requests): undici's pool,
  // whose CPU per request is well under fetch's, on the same core as the service.
  const apiPool = new Pool(stack.apiUrl, { connections: CONCURRENCY });
  const api = async (path: string, body?: unknown, auth = true) => {
    const options = {
      path,
      method: body === undefined ? ("GET" as const) : ("POST" as const),
      headers: {
        ...(auth ? { authorization: `Bearer ${key}` } : {}),
        ...(body === undefined
          ? {}
          : { "content-type": "application/json", "idempotency-key": crypto.randomUUID() }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    };
    for (let attempt = 1; ; attempt++) {
      // A connection the server closed as it was reused fails before any request was read: sent again.
      const response = await apiPool.request(options).catch((error: unknown) => {
        if ((error as { code?: string }).code !== "ECONNRESET") throw error;
        return apiPool.request(options);
      });
      const json = (await response.body.json()) as Record<string, unknown>;
      if (response.statusCode < 300) return json;
      // 503 chain_unavailable asks to retry shortly, as a customer's page does. The forked chain
      // (flatBlockCost) keeps no past states, so a read at "latest" that meets a new block fails now and
      // then (anvil resolves "latest" to a number first): 1 in 18,000 calls in a test.
      const code = (json.error as { code?: string } | undefined)?.code;
      if (response.statusCode !== 503 || code !== "chain_unavailable" || attempt === 3)
        throw new Error(`${path}: ${response.statusCode} ${JSON.stringify(json)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
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
  /**
   * Whether any invoice is still open: cheaper than counting a period's invoices (at 30,000 due, 27 ms
   * a poll), but its cost still grows with N (34 ms a poll at 100,000 due), so the phase polls less
   * often at larger N.
   */
  const anyOpen = async () => {
    const [row] = await database.runPromise(
      Effect.flatMap(
        Effect.service(PgClient.PgClient),
        (sql) =>
          sql<{
            open: boolean;
          }>`SELECT EXISTS (SELECT 1 FROM billing.invoices WHERE status = 'open') AS open`,
      ),
    );
    return row?.open ?? false;
  };
  /**
   * Postgres's own counters of work beside the statements (cumulative): WAL written and its full-page
   * images, checkpoints, and autovacuum's vacuums and analyses. Their growth over the measured phase is
   * counted in Postgres's CPU there but is not any statement's. Beside them, the blocks found in shared
   * buffers and those read from outside (the OS's cache or the disk), and the database's size: what
   * grows with N when the data outgrows shared_buffers.
   */
  const postgresActivity = async () => {
    const [row] = await database.runPromise(
      Effect.flatMap(
        Effect.service(PgClient.PgClient),
        (sql) => sql<{
          wal_bytes: number;
          full_page_images: number;
          checkpoints: number;
          autovacuums: number;
          autoanalyzes: number;
          blocks_hit: number;
          blocks_read: number;
          database_bytes: number;
        }>`SELECT (SELECT wal_bytes FROM pg_stat_wal)::float8 AS wal_bytes,
            (SELECT wal_fpi FROM pg_stat_wal)::float8 AS full_page_images,
            (SELECT num_timed + num_requested FROM pg_stat_checkpointer)::int AS checkpoints,
            (SELECT coalesce(sum(autovacuum_count), 0) FROM pg_stat_all_tables)::int AS autovacuums,
            (SELECT coalesce(sum(autoanalyze_count), 0) FROM pg_stat_all_tables)::int AS autoanalyzes,
            (SELECT sum(blks_hit) FROM pg_stat_database)::float8 AS blocks_hit,
            (SELECT sum(blks_read) FROM pg_stat_database)::float8 AS blocks_read,
            (SELECT sum(pg_database_size(datname)) FROM pg_database)::float8 AS database_bytes`,
      ),
    );
    if (row === undefined) throw new Error("Postgres returned no activity counters");
    return row;
  };
  /** Waits for N paid invoices of `period`; counted only once no invoice is open when `cheap`. */
  const waitPaid = async (period: number, what: string, pollMs: number, cheap = false) => {
    const since = performance.now();
    for (;;) {
      const timedOut = performance.now() - since > PHASE_TIMEOUT_MS;
      const paid =
        !timedOut && cheap && (await anyOpen()) ? 0 : ((await invoices(period, "paid"))[0]?.n ?? 0);
      if (paid >= N) return;
      if (timedOut) {
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
      await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  };

  // The set-up fills an empty database within a minute, before autovacuum's first analyse
  // (autovacuum_naptime, a minute): its statements are planned without statistics, as in a new
  // deployment's first minute. Analysing every 5 s instead, as the bench did until migration 0030 removed
  // the index a relayer statement took without statistics, cost about 1 ms of Postgres's CPU per
  // authorisation (docs/performance.md at 64b9879, "Billing", sixteenth round).
  const setSystem = (setting: "autovacuum", value: "off" | "DEFAULT") =>
    database.runPromise(
      Effect.flatMap(Effect.service(PgClient.PgClient), (sql) =>
        Effect.andThen(sql.unsafe(`ALTER SYSTEM SET ${setting} = ${value}`), sql`SELECT pg_reload_conf()`),
      ),
    );
  /** VACUUM (ANALYZE) of every table of the database (the service's and Ponder's). */
  const vacuumAll = () =>
    database.runPromise(
      Effect.flatMap(Effect.service(PgClient.PgClient), (sql) =>
        Effect.flatMap(
          sql<{ name: string }>`SELECT format('%I.%I', schemaname, tablename) AS name FROM pg_tables
            WHERE schemaname NOT IN ('pg_catalog', 'information_schema')`,
          (tables) => sql.unsafe(`VACUUM (ANALYZE) ${tables.map((t) => t.name).join(", ")}`),
        ),
      ),
    );

  // With pg_stat_statements loaded (POSTGRES_FLAGS), the statements of the set-up's authorisations and
  // of the measured phase are each printed, costliest first.
  const profiling = pgStatementsLoaded();

  // A block a second (SETUP_BLOCK_SECONDS), each big enough for a few thousand transactions.
  await anvil("evm_setBlockGasLimit", ["0x3b9aca00"]);
  await anvil("evm_setAutomine", [false]);
  await anvil("evm_setIntervalMining", [SETUP_BLOCK_SECONDS]);

  // Opening the subscriptions (the API: the service and Postgres) and funding the customers (the
  // bench's signing threads and anvil) need nothing of each other, so they run side by side; each is
  // timed from the common start.
  const started = performance.now();
  const subscriptions: { id: string; token: string }[] = [];
  const opening = async () => {
    const price = await api("/v1/prices", { product_name: "Seat", amount_decimal: "5", chain: 31337 });
    await inPool(
      Array.from({ length: N }, (_, i) => i),
      CONCURRENCY,
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
    return created;
  };
  // The faucet mints to 500 customers a transaction (TestFaucet, made a minter of the chain's USDC),
  // deployed while their keys are made.
  const MINTS_PER_TRANSACTION = 500;
  const deployer = privateKeyToAccount(LOCAL_DEPLOYER_KEY);
  const rpcUrl = resolved.rpc.http[0];
  const wallet = createWalletClient({ account: deployer, chain, transport: http(rpcUrl) });
  const funding = async () => {
    const faucetDeployed = wallet
      .deployContract({ abi: TestFaucetAbi, bytecode: TestFaucetBytecode })
      .then((hash) => client.waitForTransactionReceipt({ hash }))
      .then((receipt) => receipt.contractAddress as Hex);
    const customers = (
      await Promise.all(
        Array.from({ length: Math.ceil(N / 1_000) }, (_, i) =>
          signers.sign<{ key: Hex; address: Hex }[]>({
            kind: "customers",
            count: Math.min(1_000, N - i * 1_000),
          }),
        ),
      )
    ).flat();
    const faucet = await faucetDeployed;
    await addLocalUsdcMinter(rpcUrl, resolved.id, usdc, faucet);
    const nonce = await client.getTransactionCount({ address: deployer.address, blockTag: "pending" });
    const fees = await client.estimateFeesPerGas();
    const hashes: Hex[] = [];
    for (let i = 0; i * MINTS_PER_TRANSACTION < customers.length; i++)
      hashes.push(
        await wallet.writeContract({
          address: faucet,
          abi: TestFaucetAbi,
          functionName: "mintEach",
          args: [
            usdc,
            customers.slice(i * MINTS_PER_TRANSACTION, (i + 1) * MINTS_PER_TRANSACTION).map((c) => c.address),
            parseUnits("100", 6),
          ],
          nonce: nonce + i,
          // Given, so that nothing estimates against anvil's pending block (which re-runs its pool).
          gas: BigInt(MINTS_PER_TRANSACTION) * 40_000n,
          maxFeePerGas: fees.maxFeePerGas * 4n,
          maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
        }),
      );
    await client.waitForTransactionReceipt({ hash: hashes[hashes.length - 1] as Hex, timeout: 120_000 });
    const funded = seconds(started);
    console.log(`${N} customers funded in ${funded} s`);
    return { customers, funded };
  };
  const [created, { customers, funded }] = await Promise.all([opening(), funding()]);
  const prepared = seconds(started);

  if (profiling) await database.runPromise(resetStatements);
  const profiler = CPU_PROFILE ? await startCpuProfile() : undefined;
  const authStarted = performance.now();
  const authCpuBefore = processCpuSeconds();
  const authThreadsBefore = threadCpuSeconds();
  await inPool(subscriptions, CONCURRENCY, async (sub, i) => {
    const customer = customers[i];
    if (!customer) return;
    const request = await api(`/authorize/${sub.token}/terms`, { customer_address: customer.address }, false);
    const body = await signers.sign<Record<string, unknown>>({
      kind: "terms",
      key: customer.key,
      address: customer.address,
      terms: request.terms as PageTypedData,
      permit: request.permit as PageTypedData | null,
    });
    await api(`/authorize/${sub.token}/signatures`, body, false);
  });
  const authorised = seconds(authStarted);
  if (profiler && CPU_PROFILE) await profiler.stop(CPU_PROFILE);
  const authorisationCpu = authorisationCpuMs(
    cpuBetween(authCpuBefore, processCpuSeconds()),
    cpuBetween(authThreadsBefore, threadCpuSeconds()),
  );
  console.log(`${N} authorisations submitted in ${authorised} s`);
  await waitPaid(0, "first invoices", 100);
  const firstPaid = seconds(authStarted);
  console.log(`${N} first invoices paid ${firstPaid} s after the first signature`);
  if (profiling)
    await database.runPromise(printStatements("the set-up's authorisations, to the first invoices paid"));

  // The relayer may still be confirming the set-up's authorisations (at 10,000, ~7,800 of them when
  // the first invoices were paid): that tail is the set-up's work, so the phase starts once it is done.
  const caughtUpStarted = performance.now();
  for (;;) {
    const [row] = await database.runPromise(
      Effect.flatMap(
        Effect.service(PgClient.PgClient),
        (sql) => sql<{ n: number }>`SELECT count(*)::int AS n FROM billing.relayer_transactions
          WHERE status = 'pending'`,
      ),
    );
    if ((row?.n ?? 0) === 0 || performance.now() - caughtUpStarted > 300_000) break;
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  const relayerCaughtUp = seconds(caughtUpStarted);
  console.log(`relayer caught up with the set-up ${relayerCaughtUp} s later`);

  // A month separates two boundaries on a real chain, and autovacuum runs in it; here the set-up's writes
  // are minutes old. Without this the boundary's steps read the dead index entries of the set-up's
  // invoices (each pass O(N)) and plan with statistics from while every subscription was incomplete.
  const vacuumStarted = performance.now();
  await vacuumAll();
  // A timed checkpoint comes every `checkpoint_timeout` (5 minutes), so over a month a boundary starts
  // at most that long after one. The set-up's minutes of writes stand for a month's; a checkpoint here
  // starts the phase as a boundary would start after a timed one, instead of at whatever point of
  // the set-up's WAL the phase happens to fall (which at 10,000 due gave a checkpoint in some runs and
  // not in others).
  await database.runPromise(Effect.flatMap(Effect.service(PgClient.PgClient), (sql) => sql`CHECKPOINT`));
  const vacuumed = seconds(vacuumStarted);
  console.log(`tables vacuumed and analysed, and a checkpoint made, in ${vacuumed} s`);
  // The vacuum and analyse a boundary's writes call for are counted once at every size: after the
  // phase, by one VACUUM (ANALYZE) whose CPU is added to the phase's. Left to autovacuum, they fell
  // inside a two-minute phase (38 vacuums and 44 analyses at 100,000 due) but after a nine-second one
  // (none at 10,000), so the cost per subscription grew with N by when the work ran, not by how much.
  await setSystem("autovacuum", "off");

  // The measured phase: every subscription due at one boundary.
  const fromBlock = (await client.getBlockNumber()) + 1n;
  if (profiling) await database.runPromise(resetStatements);
  // The start and the end of the measured phase both come from the database's clock.
  const [start] = await database.runPromise(
    Effect.flatMap(
      Effect.service(PgClient.PgClient),
      (sql) => sql<{ at: Date }>`SELECT clock_timestamp() AS at`,
    ),
  );
  const cpuBefore = processCpuSeconds();
  const postgresBefore = await postgresActivity();
  await anvil("evm_setBlockGasLimit", [`0x${BLOCK_GAS_LIMIT.toString(16)}`]);
  await anvil("evm_setIntervalMining", [BLOCK_SECONDS]);
  const boundaryAt = start?.at ?? new Date();
  // With BILLING_STAGES=1: progress of each stage every 100 ms (database clock), printed at the end.
  const stages: Record<string, number>[] = [];
  // Its counts scan the phase's rows ten times a second (at 10,000 due, the phase's costliest
  // statement), so it runs only when asked.
  let sampling = process.env.BILLING_STAGES === "1";
  const sampler = (async () => {
    while (sampling) {
      const [row] = await database.runPromise(
        Effect.flatMap(
          Effect.service(PgClient.PgClient),
          (sql) => sql<Record<string, number>>`SELECT
            round(extract(epoch FROM clock_timestamp() - ${boundaryAt})::numeric, 2)::float8 AS t,
            (SELECT count(*)::int FROM billing.invoices WHERE period = 1) AS invoiced,
            (SELECT count(*)::int FROM billing.relayer_transactions WHERE created_at > ${boundaryAt}) AS signed,
            (SELECT count(*)::int FROM onchain.charge WHERE period = 1) AS indexed,
            (SELECT max(block_number)::int FROM onchain.chain_head) AS indexed_head,
            (SELECT count(*)::int FROM billing.events
              WHERE type = 'charge.succeeded' AND inserted_at > ${boundaryAt}) AS succeeded,
            (SELECT count(*)::int FROM billing.events
              WHERE type = 'invoice.paid' AND inserted_at > ${boundaryAt}) AS paid`,
        ),
      );
      if (row) stages.push({ ...row, mined_head: Number(await client.getBlockNumber({ cacheTime: 0 })) });
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  // When each block of the phase was first seen mined (anvil's head) and indexed (Ponder's chain_head),
  // in seconds after the boundary: two one-row reads every 50 ms, for the timeline per block below.
  const minedAt = new Map<number, number>();
  const indexedAt = new Map<number, number>();
  const sinceBoundary = () => Math.round(Date.now() - boundaryAt.getTime()) / 1000;
  let watchingHeads = true;
  const headWatcher = (async () => {
    while (watchingHeads) {
      const [mined, [indexed]] = await Promise.all([
        client.getBlockNumber({ cacheTime: 0 }),
        database.runPromise(
          Effect.flatMap(
            Effect.service(PgClient.PgClient),
            (sql) =>
              sql<{ head: number | null }>`SELECT max(block_number)::int AS head FROM onchain.chain_head`,
          ),
        ),
      ]);
      const at = sinceBoundary();
      if (!minedAt.has(Number(mined))) minedAt.set(Number(mined), at);
      if (indexed?.head != null && !indexedAt.has(indexed.head)) indexedAt.set(indexed.head, at);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  })();
  await api("/v1/test/clock/advance", { seconds: MONTH });
  // The phase's end is read from the database afterwards, so polling less often only delays noticing
  // it. A poll's cost grows with N (anyOpen), so its interval does too: 500 ms up to 10,000 due, 5 s at
  // 100,000 (where polls every 500 ms were 0.06 ms of Postgres per subscription, counted in the cost).
  await waitPaid(1, "boundary", Math.max(500, Math.round(N / 20)), true);
  sampling = false;
  watchingHeads = false;
  await Promise.all([sampler, headWatcher]);
  const cpuSeconds = cpuBetween(cpuBefore, processCpuSeconds());
  const memory = processMemoryMegabytes();
  const postgresAfter = await postgresActivity();
  // Postgres's statement time over the phase, every statement (the bench's own polls included), read
  // before the bench's reads of the results.
  const [statements] = profiling
    ? await database.runPromise(
        Effect.flatMap(
          Effect.service(PgClient.PgClient),
          (sql) =>
            sql<{
              ms: number;
            }>`SELECT coalesce(sum(total_exec_time), 0)::float8 AS ms FROM pg_stat_statements`,
        ),
      )
    : [];
  const statementMs = statements?.ms ?? null;
  const maintenanceBefore = processCpuSeconds();
  await vacuumAll();
  const maintenance = cpuBetween(maintenanceBefore, processCpuSeconds());
  await setSystem("autovacuum", "DEFAULT");
  const lastBlock = await client.getBlockNumber({ cacheTime: 0 });
  // One block at a time: viem refuses a response above 10 MB, and a block of 4,000 charges' logs is
  // ~3.8 MB (ten such blocks, at 30,000 due, were 28 MB).
  const logs = [];
  for (let block = fromBlock; block <= lastBlock; block++)
    for (const log of parseEventLogs({
      abi: MandateEscrowAbi,
      eventName: "Charged",
      logs: await client.getLogs({
        address: resolved.escrow.address as Hex,
        fromBlock: block,
        toBlock: block,
      }),
    }))
      logs.push(log);
  const transactions = [...new Set(logs.map((log) => log.transactionHash))];
  // CONCURRENCY at a time: each receipt carries its batch's 200 logs, and all of them asked at once (500
  // at 100,000 due) could queue on anvil past viem's 10 s request timeout.
  const receipts: Awaited<ReturnType<typeof client.getTransactionReceipt>>[] = [];
  await inPool(transactions, CONCURRENCY, async (hash) => {
    receipts.push(await client.getTransactionReceipt({ hash }));
  });
  const gas = receipts.reduce((sum, receipt) => sum + receipt.gasUsed, 0n);
  // Per block of the measured phase: gas used against the limit, charges and chargeMany transactions.
  const blocks = [];
  for (let number = fromBlock; number <= lastBlock; number++) {
    const block = await client.getBlock({ blockNumber: number });
    const inBlock = receipts.filter((receipt) => receipt.blockNumber === number);
    blocks.push({
      block: Number(number),
      gas_used: Number(block.gasUsed),
      gas_limit: Number(block.gasLimit),
      transactions: block.transactions.length,
      charge_transactions: inBlock.length,
      charges: logs.filter((log) => log.blockNumber === number).length,
    });
  }
  const signedAt = await database.runPromise(
    Effect.flatMap(
      Effect.service(PgClient.PgClient),
      (sql) => sql<Record<string, number>>`SELECT
          round(extract(epoch FROM created_at - ${boundaryAt})::numeric, 2)::float8 AS t, block_number::int AS block
        FROM billing.relayer_transactions WHERE created_at > ${boundaryAt} ORDER BY created_at`,
    ),
  );
  console.log(JSON.stringify({ blocks, signed_at: signedAt, stages }));
  /**
   * Where the boundary's time went, per block that carried charges (seconds after the boundary, database
   * clock): the invoices it charged written (first, last), their chargeMany transactions simulated and
   * recorded by the relayer (first, last), the block mined and indexed (first seen), the last
   * `charge.succeeded` written and the last of its invoices paid (`invoice.paid` is written with it).
   * A block never seen as the head (two mined between polls) has the next one's time.
   */
  const perBlock = await database.runPromise(
    Effect.flatMap(
      Effect.service(PgClient.PgClient),
      (sql) => sql<{
        block: number;
        charges: number;
        transactions: number;
        first_invoice: number;
        last_invoice: number;
        first_sent: number;
        last_sent: number;
        last_succeeded: number | null;
        last_paid: number | null;
      }>`WITH charged AS (
          SELECT c.block_number AS block, count(*)::int AS charges,
            count(DISTINCT c.relayer_purpose)::int AS transactions,
            min(i.created_at) AS first_invoice, max(i.created_at) AS last_invoice,
            min(r.created_at) AS first_sent, max(r.created_at) AS last_sent,
            max(i.updated_at) FILTER (WHERE i.status = 'paid') AS last_paid
          FROM billing.invoices i
          JOIN billing.charges c ON c.id = i.charge_id
          JOIN billing.relayer_transactions r ON r.chain_id = c.chain_id AND r.purpose = c.relayer_purpose
          WHERE i.period = 1 AND c.block_number IS NOT NULL
          GROUP BY c.block_number),
        written AS (
          SELECT block_number AS block, max(inserted_at) AS last_succeeded FROM billing.events
          WHERE type = 'charge.succeeded' AND inserted_at > ${boundaryAt} GROUP BY block_number)
        SELECT charged.block::int AS block, charges, transactions,
          extract(epoch FROM first_invoice)::float8 AS first_invoice,
          extract(epoch FROM last_invoice)::float8 AS last_invoice,
          extract(epoch FROM first_sent)::float8 AS first_sent,
          extract(epoch FROM last_sent)::float8 AS last_sent,
          extract(epoch FROM last_succeeded)::float8 AS last_succeeded,
          extract(epoch FROM last_paid)::float8 AS last_paid
        FROM charged LEFT JOIN written USING (block) ORDER BY block`,
    ),
  );
  const firstSeen = (seen: Map<number, number>, block: number) => {
    const later = [...seen].filter(([number]) => number >= block).map(([, at]) => at);
    return later.length === 0 ? null : Math.min(...later);
  };
  const after = (epoch: number | null) =>
    epoch === null ? null : Math.round(epoch * 1_000 - boundaryAt.getTime()) / 1_000;
  const blockTimeline = perBlock.map((row) => ({
    block: row.block,
    charges: row.charges,
    transactions: row.transactions,
    first_invoice: after(row.first_invoice),
    last_invoice: after(row.last_invoice),
    first_sent: after(row.first_sent),
    last_sent: after(row.last_sent),
    mined: firstSeen(minedAt, row.block),
    indexed: firstSeen(indexedAt, row.block),
    last_succeeded: after(row.last_succeeded),
    last_paid: after(row.last_paid),
  }));
  console.table(blockTimeline);
  /** Seconds after the boundary by which the first and last of each step happened (database clock). */
  const [timeline] = await database.runPromise(
    Effect.flatMap(
      Effect.service(PgClient.PgClient),
      (sql) => sql<Record<string, number>>`SELECT
        (SELECT extract(epoch FROM min(created_at) - ${boundaryAt})::float8 FROM billing.invoices WHERE period = 1) AS first_invoice,
        (SELECT extract(epoch FROM max(created_at) - ${boundaryAt})::float8 FROM billing.invoices WHERE period = 1) AS last_invoice,
        (SELECT extract(epoch FROM max(created_at) - ${boundaryAt})::float8 FROM billing.relayer_transactions
          WHERE created_at > ${boundaryAt}) AS last_charge_signed,
        (SELECT extract(epoch FROM max(inserted_at) - ${boundaryAt})::float8 FROM billing.events
          WHERE type = 'charge.succeeded' AND inserted_at > ${boundaryAt}) AS last_charge_succeeded,
        (SELECT extract(epoch FROM max(inserted_at) - ${boundaryAt})::float8 FROM billing.events
          WHERE type = 'invoice.paid' AND inserted_at > ${boundaryAt}) AS last_invoice_paid`,
    ),
  );
  if (profiling) {
    await database.runPromise(printStatements("the measured phase"));
    // Which indexes the phase read, and how many entries: an index read far more than the rows its
    // statements return is a plan that scans.
    const indexes = await database.runPromise(
      Effect.flatMap(
        Effect.service(PgClient.PgClient),
        (sql) => sql`SELECT relname AS table, indexrelname AS index, idx_scan::int AS scans,
            idx_tup_read::int AS entries_read
          FROM pg_stat_user_indexes WHERE schemaname = 'billing' AND idx_scan > 0
          ORDER BY idx_tup_read DESC LIMIT 15`,
      ),
    );
    console.table(indexes);
    // Row versions each table got: an update that is not HOT adds an entry to every index of its table.
    const writes = await database.runPromise(
      Effect.flatMap(
        Effect.service(PgClient.PgClient),
        (sql) => sql`SELECT relname AS table, n_tup_ins::int AS inserts, n_tup_upd::int AS updates,
            n_tup_hot_upd::int AS hot_updates, n_tup_del::int AS deletes
          FROM pg_stat_user_tables WHERE schemaname = 'billing' AND n_tup_ins + n_tup_upd + n_tup_del > 0
          ORDER BY n_tup_ins + n_tup_upd + n_tup_del DESC`,
      ),
    );
    console.table(writes);
  }
  await database.dispose();
  await apiPool.close();

  const elapsed = timeline?.last_invoice_paid ?? Number.NaN;
  const perSecond = Math.round((N / elapsed) * 10) / 10;
  const cost = costPerSubscription(cpuSeconds, maintenance.postgres ?? 0, elapsed, gas);
  const setup = Math.round((prepared + firstPaid) * 100) / 100;
  const gasPerSubscription = logs.length === 0 ? null : Number(gas / BigInt(logs.length));
  const capacity =
    gasPerSubscription === null ? null : Number(BLOCK_GAS_LIMIT) / gasPerSubscription / BLOCK_SECONDS;
  const ofCapacity = capacity === null ? null : N / elapsed / capacity;
  const summary: SummaryRow[] = [
    {
      what: `subscriptions billed/s, ${N.toLocaleString("en-US")} due`,
      figure: perSecond,
      unit: "subscriptions/s",
      baseline: capacity === null ? null : Math.round(capacity * 10) / 10,
      baseline_what:
        gasPerSubscription === null
          ? null
          : `the chain's capacity: ${Number(BLOCK_GAS_LIMIT).toLocaleString("en-US")} gas a block ÷ ${gasPerSubscription.toLocaleString("en-US")} gas per subscription ÷ ${BLOCK_SECONDS} s, same run`,
      ratio: ofCapacity === null ? null : thousandths(ofCapacity),
      target: `ratio ≥ ${TARGET_OF_CAPACITY}`,
      meets_target: ofCapacity === null ? null : ofCapacity >= TARGET_OF_CAPACITY,
    },
  ];
  summary.push({
    what: `billing CPU per subscription (service, Postgres with the vacuum after, Ponder), ${N.toLocaleString("en-US")} due`,
    figure: cost.cpu_ms,
    unit: "ms",
    baseline: tenThousand?.cpu_ms ?? null,
    baseline_what:
      tenThousand === undefined
        ? null
        : `10,000 due, run just before by the same command (${tenThousand.measured_at.slice(0, 16)})`,
    ratio: tenThousand === undefined ? null : thousandths(cost.cpu_ms / tenThousand.cpu_ms),
    target: N === 10_000 ? null : AGAINST_TEN_THOUSAND,
    meets_target: tenThousand === undefined ? null : cost.cpu_ms <= tenThousand.cpu_ms * 1.2,
  });
  if (N === 10_000)
    summary.push({
      what: "bench:billing set-up, 10,000 authorisations",
      figure: setup,
      unit: "s",
      baseline: null,
      baseline_what: null,
      ratio: null,
      target: null,
      meets_target: null,
    });
  const details = {
    what: "N subscriptions due at one period boundary: from moving the chain's clock past it to the last invoice.paid (invoice written, chargeMany simulated and mined, indexed, settled); both ends from the database's clock",
    conditions: `Ponder 0.17.7 over WebSocket, confirmations 0; set-up on anvil mining a block every ${SETUP_BLOCK_SECONDS} s (1,000,000,000 gas); measured phase on anvil modelling Base mainnet: a block every ${BLOCK_SECONDS} s, ${BLOCK_GAS_LIMIT.toLocaleString("en-US")} gas each; bench signing in ${SIGNERS} worker threads, ${CONCURRENCY} customers at once`,
    subscriptions: N,
    elapsed_seconds: Math.round(elapsed * 100) / 100,
    subscriptions_per_second: perSecond,
    charges_on_chain: logs.length,
    charge_transactions: transactions.length,
    charges_per_transaction: Math.round((logs.length / Math.max(1, transactions.length)) * 10) / 10,
    gas_per_subscription: gasPerSubscription,
    block_seconds: BLOCK_SECONDS,
    block_gas_limit: Number(BLOCK_GAS_LIMIT),
    block_gas_peak: Math.max(0, ...blocks.map((b) => b.gas_used)),
    block_charges_peak: Math.max(0, ...blocks.map((b) => b.charges)),
    measured_phase_cpu_seconds: cpuSeconds,
    /** Each process's memory when the phase ended (`self` is the service with the bench's client). */
    memory_at_phase_end_mb: memory,
    maintenance_cpu_seconds: maintenance,
    cost_per_subscription: cost,
    postgres_statement_ms_per_subscription: statementMs === null ? null : thousandths(statementMs / N),
    measured_phase_postgres: {
      wal_bytes_per_subscription: Math.round((postgresAfter.wal_bytes - postgresBefore.wal_bytes) / N),
      full_page_images_per_subscription: thousandths(
        (postgresAfter.full_page_images - postgresBefore.full_page_images) / N,
      ),
      checkpoints: postgresAfter.checkpoints - postgresBefore.checkpoints,
      autovacuums: postgresAfter.autovacuums - postgresBefore.autovacuums,
      autoanalyzes: postgresAfter.autoanalyzes - postgresBefore.autoanalyzes,
      blocks_hit_per_subscription: thousandths((postgresAfter.blocks_hit - postgresBefore.blocks_hit) / N),
      blocks_read_per_subscription: thousandths((postgresAfter.blocks_read - postgresBefore.blocks_read) / N),
      database_megabytes_after: Math.round(postgresAfter.database_bytes / 2 ** 20),
    },
    timeline_seconds: timeline,
    timeline_per_block_seconds: blockTimeline,
    setup_seconds: {
      open: created,
      fund: funded,
      open_and_fund: prepared,
      authorise: authorised,
      first_invoices_paid: firstPaid,
      total: setup,
      relayer_caught_up_after: relayerCaughtUp,
      vacuum_analyze: vacuumed,
    },
    setup_cpu_ms_per_authorisation: authorisationCpu,
  };
  const command = N === 10_000 ? "npm run bench:billing" : `BILLING_SUBSCRIPTIONS=${N} npm run bench:billing`;
  writeResults(N === 10_000 ? "billing" : `billing-${N}`, command, summary, details);
  console.log(JSON.stringify({ summary, ...details }, null, 2));
} finally {
  await signers.stop();
  await scratch.stop();
}
