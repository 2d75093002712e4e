/**
 * `npm run bench:payments`: N one-time payments paid at once by plain ERC-20 transfers, end to end
 * (transfer mined → deposit watcher → `sweep` by the relayer → indexed → `payment.paid` in the outbox),
 * and the gas the sweep spends per payment moved to the merchant, beside a plain `transfer` of the same
 * token measured in the same run.
 *
 * Starts the real stack on fresh ports (embedded Postgres, anvil over WebSocket, Ponder, the service) on
 * the bench chain: confirmations 0, no escrow hold (a sweep pays the merchant's payout address). The API
 * creates N payments (PAYMENTS_N, default 500, of PAYMENTS_AMOUNT, default 10.00 USDC); N fresh payer
 * wallets get ETH (anvil_setBalance) and twice the amount in test USDC (its public `mint`), and every
 * transfer is signed before the measured phase. The merchant's payout address already holds some USDC
 * (steady state, as in bench:gas).
 *
 * Measured phase: all N transfers are broadcast at once (PAYMENTS_SEND_CONCURRENCY requests in flight;
 * PAYMENTS_RATE > 0 paces them instead). anvil mines a block every PAYMENTS_BLOCK_TIME seconds (default 1)
 * with a large gas limit, like a real chain, so the burst lands in one block, as it would on an L2. With
 * automine (PAYMENTS_BLOCK_TIME=0) anvil cut the same burst into ~240 blocks of one to a few transfers:
 * the watcher saw the first blocks in one pass and the rest in the next (sweeps of 3, 15, 32 and 50),
 * read one header per block, and Ponder had ~240 blocks to fetch under its rate limit (about 20 JSON-RPC
 * requests a second per RPC URL at first, see bench/latency.ts): a chain that no real one resembles. A
 * burst, not a pace: the question is how the sweeper batches payments that arrive together.
 * A transfer counts as mined when this process receives its block's header (`eth_subscribe newHeads`
 * over WebSocket, as Ponder does), and a payment as paid when its `payment.paid` row is visible in
 * billing.events after a Postgres NOTIFY on the outbox's channel. Between the two, every 25 ms, the
 * bench samples when the watcher's record of each payment and the indexer's facts of each sweep become
 * visible, and takes the sweep's start from its relayer record: the stages in the report.
 *
 * Checks: exactly one `payment.paid` per payment, status `paid` through GET /v1/payments/{id}, and the
 * payout address received exactly N × amount. Gas: every `sweep` the relayer sent (batch size from its
 * PaymentReceived logs), per payment for full batches of 50; if none formed, a second phase pays 50 new
 * payments within one block (mining paused, then one `evm_mine`), which the watcher sees in one pass and
 * the sweeper moves in one batch. Writes bench/results/payments.json.
 */

import { cpus } from "node:os";
import { PgClient } from "@effect/sql-pg";
import { Duration, Effect, Fiber, ManagedRuntime, Queue, Redacted } from "effect";
import {
  createPublicClient,
  defineChain,
  encodeFunctionData,
  erc20Abi,
  formatUnits,
  type Hex,
  http,
  type PrivateKeyAccount,
  parseEventLogs,
  parseUnits,
  webSocket,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { MandateEscrowAbi } from "../abis/MandateEscrow.ts";
import { usdcAbi } from "../scripts/stack/circle-usdc.ts";
import { LOCAL_DEPLOYER_KEY, LOCAL_FAUCET_KEY } from "../scripts/stack/local-chain.ts";
import { inPool } from "../scripts/stack/pool.ts";
import { startScratchStack, stopOnSignal } from "../scripts/stack/scratch-stack.ts";
import { EVENTS_CHANNEL } from "../service/events/outbox.ts";
import { SWEEP_BATCH } from "../service/payments/deposit-sweeper.ts";
import { benchChain } from "./local-chain-config.ts";
import { percentiles, ratioTo, wall, writeResults } from "./report.ts";
import { stackApi } from "./stack-api.ts";

const N = Number(process.env.PAYMENTS_N ?? 500);
const AMOUNT = process.env.PAYMENTS_AMOUNT ?? "10.00";
const BLOCK_TIME = Number(process.env.PAYMENTS_BLOCK_TIME ?? 1);
const RATE = Number(process.env.PAYMENTS_RATE ?? 0);
const SEND_CONCURRENCY = Number(process.env.PAYMENTS_SEND_CONCURRENCY ?? 64);
const TIMEOUT_MS = Number(process.env.PAYMENTS_TIMEOUT_S ?? 300) * 1000;
/** API requests and setup RPC calls in flight. */
const CONCURRENCY = 32;
const DECIMALS = 6;

const seconds = (ms: number) => Math.round(ms / 10) / 100;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Payment {
  readonly id: string;
  readonly address: Hex;
}

console.log("starting the stack ...");
const scratch = await startScratchStack("payments", { chains: [benchChain("payments")] });
const { stack } = scratch;
stopOnSignal(scratch);
try {
  const resolved = stack.chains[0];
  if (!resolved?.rpc?.ws || !resolved.escrow.address) throw new Error("no resolved chain");
  const escrow = resolved.escrow.address as Hex;
  const usdc = resolved.tokens[0]?.address as Hex;
  const chain = defineChain({
    id: 31337,
    name: "anvil",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [...resolved.rpc.http] } },
  });
  const client = createPublicClient({ chain, transport: http(resolved.rpc.http[0]) });
  const anvil = (method: string, params: unknown[]) => client.request({ method, params } as never);
  const deployer = privateKeyToAccount(LOCAL_DEPLOYER_KEY);
  const amount = parseUnits(AMOUNT, DECIMALS);
  const api = stackApi(stack);
  const database = ManagedRuntime.make(
    PgClient.layer({ url: Redacted.make(stack.databaseUrl), maxConnections: 3 }),
  );
  const query = <A extends object>(
    run: (sql: PgClient.PgClient) => Effect.Effect<ReadonlyArray<A>, unknown>,
  ) => database.runPromise(Effect.flatMap(Effect.service(PgClient.PgClient), run));

  // Blocks as this process sees them arrive (the moment a transaction counts as mined).
  const headSeen = new Map<bigint, number>();
  const heads = createPublicClient({ chain, transport: webSocket(resolved.rpc.ws, { reconnect: false }) });
  const unwatch = heads.watchBlocks({
    onBlock: (block) => {
      if (block.number !== null && !headSeen.has(block.number)) headSeen.set(block.number, wall());
    },
    onError: (error) => console.error(`newHeads: ${error.message}`),
  });
  const minedAt = async (blockNumber: bigint) => {
    for (let i = 0; i < 100 && !headSeen.has(blockNumber); i++) await sleep(20);
    const seen = headSeen.get(blockNumber);
    if (seen === undefined) throw new Error(`block ${blockNumber} never announced over newHeads`);
    return seen;
  };

  /**
   * `payment.paid` as the outbox shows it: after every NOTIFY on its channel (or 250 ms without one),
   * the rows not seen yet; the moment a row is first visible counts as the payment paid.
   */
  const paidSeen = new Map<string, { seen: number; inserted: number }>();
  const watchStart = new Date();
  const watcher = database.runFork(
    Effect.scoped(
      Effect.gen(function* () {
        const sql = yield* PgClient.PgClient;
        const notifications = yield* sql.listen(EVENTS_CHANNEL);
        for (;;) {
          const rows = yield* sql<{
            payment: string;
            inserted: number;
          }>`SELECT payload->'data'->'object'->>'id' AS payment,
              extract(epoch FROM inserted_at)::float8 * 1000 AS inserted
            FROM billing.events WHERE type = 'payment.paid' AND inserted_at >= ${watchStart}`;
          const seen = wall();
          for (const row of rows)
            if (!paidSeen.has(row.payment)) paidSeen.set(row.payment, { seen, inserted: row.inserted });
          yield* Queue.take(notifications).pipe(Effect.timeoutOption(Duration.millis(250)));
          yield* Queue.clear(notifications);
        }
      }),
    ),
  );
  const waitPaid = async (payments: readonly Payment[], what: string) => {
    const since = performance.now();
    for (;;) {
      const missing = payments.filter((p) => !paidSeen.has(p.id));
      if (missing.length === 0) return;
      if (performance.now() - since > TIMEOUT_MS) {
        const stuck = await query(
          (sql) => sql`SELECT status, sweep_due, sweeps, count(*)::int AS n FROM billing.payments
            WHERE id = ANY (${missing.map((p) => p.id)}::text[]) GROUP BY 1, 2, 3`,
        );
        console.error(JSON.stringify(stuck));
        throw new Error(
          `${what}: ${missing.length} of ${payments.length} not paid after ${seconds(TIMEOUT_MS)} s`,
        );
      }
      await sleep(50);
    }
  };

  let deployerNonce = await client.getTransactionCount({ address: deployer.address, blockTag: "pending" });
  // The local USDC's test faucet mints (local-chain.ts).
  const faucet = privateKeyToAccount(LOCAL_FAUCET_KEY);
  let faucetNonce = await client.getTransactionCount({ address: faucet.address, blockTag: "pending" });
  const fees = await client.estimateFeesPerGas();
  const signAs = (account: PrivateKeyAccount, nonce: number, to: Hex, data: Hex) =>
    account.signTransaction({
      chainId: 31337,
      type: "eip1559",
      nonce,
      to,
      gas: 200_000n,
      maxFeePerGas: fees.maxFeePerGas * 4n,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      data,
    });
  const broadcast = (raw: Hex) => client.sendRawTransaction({ serializedTransaction: raw });
  const receipt = (hash: Hex) =>
    client.waitForTransactionReceipt({ hash, timeout: 120_000, pollingInterval: 50 });
  const mint = (to: Hex, units: bigint) =>
    signAs(
      faucet,
      faucetNonce++,
      usdc,
      encodeFunctionData({ abi: usdcAbi, functionName: "mint", args: [to, units] }),
    );
  const transferData = (to: Hex, units: bigint) =>
    encodeFunctionData({ abi: erc20Abi, functionName: "transfer", args: [to, units] });
  const balanceOf = (address: Hex) =>
    client.readContract({ address: usdc, abi: erc20Abi, functionName: "balanceOf", args: [address] });

  /** Creates `count` payments through the API and funds a payer for each, one transfer signed per payer. */
  const prepare = async (count: number) => {
    const payments = await inPool(Array.from({ length: count }), CONCURRENCY, async () => {
      const p = await api("/v1/payments", { amount_decimal: AMOUNT });
      return { id: p.id as string, address: p.address as Hex };
    });
    const payers = payments.map(() => privateKeyToAccount(generatePrivateKey()));
    await inPool(payers, CONCURRENCY, (payer) =>
      anvil("anvil_setBalance", [payer.address, "0xde0b6b3a7640000"]),
    );
    const mints: Hex[] = [];
    for (const payer of payers) mints.push(await mint(payer.address, amount * 2n));
    const hashes = await inPool(mints, CONCURRENCY, broadcast);
    await Promise.all(hashes.slice(-1).map(receipt));
    const transfers = await Promise.all(
      payers.map((payer, i) => signAs(payer, 0, usdc, transferData(payments[i]?.address as Hex, amount))),
    );
    return { payments, transfers };
  };

  // Blocks of BLOCK_TIME seconds, each with room for thousands of transfers (0: automine).
  await anvil("evm_setBlockGasLimit", ["0x3b9aca00"]);
  if (BLOCK_TIME > 0) {
    await anvil("evm_setAutomine", [false]);
    await anvil("evm_setIntervalMining", [BLOCK_TIME]);
  }
  const pauseMining = () =>
    BLOCK_TIME > 0 ? anvil("evm_setIntervalMining", [0]) : anvil("evm_setAutomine", [false]);
  const resumeMining = () =>
    BLOCK_TIME > 0 ? anvil("evm_setIntervalMining", [BLOCK_TIME]) : anvil("evm_setAutomine", [true]);

  const setupStarted = performance.now();
  const [payee] = await query<{ payee: string }>(
    (sql) => sql`SELECT payout_address AS payee FROM billing.merchant_chains
      WHERE merchant_id = ${stack.devMerchant.merchantId} AND chain_id = 31337`,
  );
  if (!payee) throw new Error("the dev merchant has no payout address on the bench chain");
  const payout = payee.payee as Hex;
  // Steady state: the merchant and the plain-transfer sender already hold the token.
  const warmHashes = await inPool(
    [
      await mint(payout, parseUnits("1", DECIMALS)),
      await mint(deployer.address, parseUnits("1000", DECIMALS)),
    ],
    CONCURRENCY,
    broadcast,
  );
  await Promise.all(warmHashes.map(receipt));

  console.log(`preparing ${N} payments and payers ...`);
  const { payments, transfers } = await prepare(N);
  const prepared = seconds(performance.now() - setupStarted);
  console.log(`${N} payments created and their payers funded in ${prepared} s`);

  // A quiet start: the indexer has caught up with the setup's blocks.
  const chainHead = await client.getBlockNumber();
  for (let i = 0; i < 100; i++) {
    const [row] = await query<{ n: string }>(
      (sql) => sql`SELECT block_number::text AS n FROM onchain.chain_head`,
    );
    if (BigInt(row?.n ?? 0) >= chainHead) break;
    await sleep(100);
  }
  const payoutBefore = await balanceOf(payout);

  console.log(
    `measuring: ${N} transfers ${RATE > 0 ? `at ${RATE}/s` : `at once (${SEND_CONCURRENCY} in flight)`}, ${BLOCK_TIME > 0 ? `a block every ${BLOCK_TIME} s` : "automine"} ...`,
  );
  // When the deposit watcher's record of each transfer becomes visible (the payment leaves
  // requires_payment), sampled every 25 ms: separates the watcher from the sweeper.
  // Likewise when the indexer's facts of each sweep become visible (onchain.fact, what the relay reads):
  // separates Ponder from the fact relay.
  const watcherSeen = new Map<string, number>();
  const indexedSeen = new Map<string, number>();
  const headBefore = (await client.getBlockNumber()).toString();
  const sampling = (async () => {
    const ids = payments.map((p) => p.id);
    while (paidSeen.size < ids.length || watcherSeen.size < ids.length) {
      const rows = await query<{ id: string }>(
        (sql) => sql`SELECT id FROM billing.payments WHERE id = ANY (${ids}::text[])
          AND status <> 'requires_payment'`,
      );
      const facts = await query<{ tx: string }>(
        (sql) => sql`SELECT DISTINCT lower(tx_hash) AS tx FROM onchain.fact
          WHERE kind = 'payment.received' AND block_number > ${headBefore}::numeric`,
      );
      const seen = wall();
      for (const row of rows) if (!watcherSeen.has(row.id)) watcherSeen.set(row.id, seen);
      for (const row of facts) if (!indexedSeen.has(row.tx)) indexedSeen.set(row.tx, seen);
      await sleep(25);
    }
  })();
  const sendStart = wall();
  const hashes = await inPool(transfers, RATE > 0 ? 1 : SEND_CONCURRENCY, async (raw, i) => {
    if (RATE > 0) {
      const due = sendStart + (i * 1000) / RATE - wall();
      if (due > 0) await sleep(due);
    }
    return broadcast(raw);
  });
  const sent = wall();
  console.log(`${N} transfers broadcast in ${seconds(sent - sendStart)} s`);
  await waitPaid(payments, "measured phase");
  await sampling;
  const allPaid = Math.max(...payments.map((p) => paidSeen.get(p.id)?.seen ?? 0));
  console.log(`all ${N} paid ${seconds(allPaid - sendStart)} s after the first transfer was sent`);

  const receipts = await inPool(hashes, CONCURRENCY, (hash) => client.getTransactionReceipt({ hash }));
  const failed = receipts.filter((r) => r.status !== "success").length;
  if (failed > 0) throw new Error(`${failed} payer transfers reverted`);
  const mined = await Promise.all(receipts.map((r) => minedAt(r.blockNumber)));
  const transferBlocks = [...new Set(receipts.map((r) => r.blockNumber))];
  const firstTransferBlock = [...transferBlocks].sort((a, b) => Number(a - b))[0] ?? 0n;
  const latencies = payments.map((p, i) => (paidSeen.get(p.id)?.seen ?? 0) - (mined[i] ?? 0));
  const latenciesByInsert = payments.map((p, i) => (paidSeen.get(p.id)?.inserted ?? 0) - (mined[i] ?? 0));

  // Checks: one payment.paid each, status paid through the API, the payout address received N × amount.
  const eventCounts = await query<{ payment: string; n: number }>(
    (sql) => sql`SELECT payload->'data'->'object'->>'id' AS payment, count(*)::int AS n FROM billing.events
      WHERE type = 'payment.paid' AND payload->'data'->'object'->>'id' = ANY (${payments.map((p) => p.id)}::text[])
      GROUP BY 1`,
  );
  const counts = new Map(eventCounts.map((row) => [row.payment, row.n]));
  const statuses = await inPool(
    payments,
    CONCURRENCY,
    async (p) => (await api(`/v1/payments/${p.id}`)).status as string,
  );
  const payoutReceived = (await balanceOf(payout)) - payoutBefore;
  const checks = {
    payments_with_one_payment_paid: payments.filter((p) => counts.get(p.id) === 1).length,
    payments_with_more_than_one: payments.filter((p) => (counts.get(p.id) ?? 0) > 1).length,
    status_paid_via_api: statuses.filter((s) => s === "paid").length,
    payout_received_decimal: formatUnits(payoutReceived, DECIMALS),
    payout_expected_decimal: formatUnits(amount * BigInt(N), DECIMALS),
  };
  const checksPass =
    checks.payments_with_one_payment_paid === N &&
    checks.status_paid_via_api === N &&
    payoutReceived === amount * BigInt(N);

  /**
   * The sweeps that moved these payments, as the chain shows them (the escrow's PaymentReceived logs of
   * their deposit addresses; the relayer's own records may still say pending): batch size (every
   * PaymentReceived of the transaction), gas, when the sweeper recorded it and when its block arrived.
   */
  const sweepsOf = async (batch: readonly Payment[], fromBlock: bigint) => {
    const byDeposit = new Map(batch.map((p) => [p.address.toLowerCase(), p.id]));
    const received = parseEventLogs({
      abi: MandateEscrowAbi,
      eventName: "PaymentReceived",
      logs: await client.getLogs({ address: escrow, fromBlock, toBlock: "latest" }),
    }).filter((log) => byDeposit.has(log.args.depositAddress.toLowerCase()));
    const hashes = [...new Set(received.map((log) => log.transactionHash))];
    return inPool(hashes, CONCURRENCY, async (hash) => {
      const r = await client.getTransactionReceipt({ hash });
      if (r.to?.toLowerCase() !== escrow.toLowerCase()) throw new Error(`sweep ${hash} not to the escrow`);
      const [recorded] = await query<{ purpose: string; created: number }>(
        (sql) => sql`SELECT purpose, extract(epoch FROM created_at)::float8 * 1000 AS created
          FROM billing.relayer_transactions WHERE ${hash} = ANY (hashes)`,
      );
      if (!recorded?.purpose.startsWith("sweep:")) throw new Error(`${hash} is no sweep of the relayer's`);
      return {
        hash,
        sender: r.from.toLowerCase(),
        purpose: recorded.purpose,
        created: recorded.created,
        ids: received
          .filter((log) => log.transactionHash === hash)
          .map((log) => byDeposit.get(log.args.depositAddress.toLowerCase()) ?? ""),
        batch: parseEventLogs({ abi: MandateEscrowAbi, eventName: "PaymentReceived", logs: r.logs }).length,
        gas: Number(r.gasUsed),
        minedSeen: await minedAt(r.blockNumber),
      };
    });
  };
  const sweeps = await sweepsOf(payments, firstTransferBlock);
  const sweepOf = new Map(sweeps.flatMap((s) => s.ids.map((id) => [id, s] as const)));
  /** Per payment: transfer mined → sweep batch started (watcher + sweeper), → sweep mined, → payment.paid. */
  const stages = payments.map((p, i) => {
    const s = sweepOf.get(p.id);
    const paid = paidSeen.get(p.id)?.seen ?? 0;
    return s === undefined
      ? undefined
      : {
          toWatcher: (watcherSeen.get(p.id) ?? 0) - (mined[i] ?? 0),
          watcherToSweep: s.created - (watcherSeen.get(p.id) ?? 0),
          toSweep: s.created - (mined[i] ?? 0),
          sweepMined: s.minedSeen - s.created,
          toIndexed: (indexedSeen.get(s.hash.toLowerCase()) ?? 0) - s.minedSeen,
          indexedToPaid: paid - (indexedSeen.get(s.hash.toLowerCase()) ?? 0),
          toPaid: paid - s.minedSeen,
        };
  });
  const staged = stages.filter((s) => s !== undefined);
  /** Each sweep, in ms after the first transfer block arrived: batch started (DB clock), mined, last paid. */
  const firstMined = Math.min(...mined);
  const timeline = sweeps
    .map((s) => ({
      batch: s.batch,
      gas: s.gas,
      batched_ms: Math.round(s.created - firstMined),
      mined_ms: Math.round(s.minedSeen - firstMined),
      indexed_ms: Math.round((indexedSeen.get(s.hash.toLowerCase()) ?? 0) - firstMined),
      last_paid_ms: Math.round(Math.max(...s.ids.map((id) => paidSeen.get(id)?.seen ?? 0)) - firstMined),
    }))
    .sort((a, b) => a.batched_ms - b.batched_ms);
  const batchSizes: Record<string, number> = {};
  for (const s of sweeps) batchSizes[String(s.batch)] = (batchSizes[String(s.batch)] ?? 0) + 1;

  // Full batches of SWEEP_BATCH: from the measured phase, or a phase that pays 50 within one block.
  let full = sweeps.filter((s) => s.batch === SWEEP_BATCH);
  let fullSource = "measured phase";
  if (full.length === 0) {
    console.log(`no sweep of ${SWEEP_BATCH} formed; paying ${SWEEP_BATCH} payments within one block ...`);
    const batch = await prepare(SWEEP_BATCH);
    await pauseMining();
    const batchHashes = await inPool(batch.transfers, SEND_CONCURRENCY, broadcast);
    await anvil("evm_mine", []);
    await resumeMining();
    const batchReceipts = await Promise.all(batchHashes.map(receipt));
    if (new Set(batchReceipts.map((r) => r.blockNumber)).size !== 1)
      throw new Error("the batch spans blocks");
    await waitPaid(batch.payments, "batch phase");
    full = (await sweepsOf(batch.payments, batchReceipts[0]?.blockNumber ?? 0n)).filter(
      (s) => s.batch === SWEEP_BATCH,
    );
    fullSource = `second phase: ${SWEEP_BATCH} payments paid within one block`;
  }

  // A plain transfer of the same token from a holder: to a fresh address, then to it again (now a holder).
  const plain = privateKeyToAccount(generatePrivateKey()).address;
  const plainGas = async (to: Hex) =>
    Number(
      (
        await receipt(
          await broadcast(await signAs(deployer, deployerNonce++, usdc, transferData(to, amount))),
        )
      ).gasUsed,
    );
  const toFresh = await plainGas(plain);
  const toHolder = await plainGas(plain);
  const payerGas = receipts.map((r) => Number(r.gasUsed)).sort((a, b) => a - b);

  unwatch();
  (await heads.transport.getRpcClient()).close();
  await database.runPromise(Fiber.interrupt(watcher));
  await database.dispose();

  const sweepGas = sweeps.reduce((sum, s) => sum + s.gas, 0);
  const sweptPayments = sweeps.reduce((sum, s) => sum + s.batch, 0);
  const fullGas = full.reduce((sum, s) => sum + s.gas, 0);
  const fullPerPayment = full.length === 0 ? null : Math.round(fullGas / (full.length * SWEEP_BATCH));
  const relayers = [...new Set(sweeps.map((s) => s.sender.toLowerCase()))];
  const ratio = (x: number | null, y: number) => (x === null ? null : Math.round((x / y) * 100) / 100);
  const latency = percentiles(latencies);
  const details = {
    what: "N one-time payments paid by plain ERC-20 transfers to their deposit addresses: transfer mined (its block header received over newHeads) -> payment.paid visible in the outbox (billing.events, after NOTIFY); and the relayer's sweep gas per payment moved to the merchant",
    conditions: `Ponder 0.17.7 over WebSocket, confirmations 0, no escrow hold, ${BLOCK_TIME > 0 ? `anvil mining a block every ${BLOCK_TIME} s (gas limit 1e9)` : "anvil automine (a block per transaction)"}, transfers ${RATE > 0 ? `paced at ${RATE}/s` : `sent at once (${SEND_CONCURRENCY} requests in flight)`}, ${cpus().length} cores, Node ${process.version}`,
    chain: {
      id: 31337,
      block_time_seconds: BLOCK_TIME,
      confirmations: 0,
      hold_seconds: 0,
      sweep_batch: SWEEP_BATCH,
    },
    payments: N,
    amount_decimal: AMOUNT,
    setup_seconds: prepared,
    send_seconds: seconds(sent - sendStart),
    transfer_blocks: transferBlocks.length,
    mined_to_paid: latency,
    mined_to_outbox_insert: percentiles(latenciesByInsert),
    stages: {
      mined_to_watcher_recorded: percentiles(staged.map((s) => s.toWatcher)),
      watcher_recorded_to_sweep_batched: percentiles(staged.map((s) => s.watcherToSweep)),
      mined_to_sweep_batched: percentiles(staged.map((s) => s.toSweep)),
      sweep_batched_to_mined: percentiles(staged.map((s) => s.sweepMined)),
      sweep_mined_to_indexed: percentiles(staged.map((s) => s.toIndexed)),
      indexed_to_paid: percentiles(staged.map((s) => s.indexedToPaid)),
      sweep_mined_to_paid: percentiles(staged.map((s) => s.toPaid)),
    },
    sweeps_ms_after_first_transfer_block: timeline,
    watcher_recorded_all_ms_after_first_transfer_block: Math.round(
      Math.max(...watcherSeen.values()) - firstMined,
    ),
    all_paid_seconds: {
      from_first_send: seconds(allPaid - sendStart),
      from_last_transfer_mined: seconds(allPaid - Math.max(...mined)),
    },
    checks,
    gas: {
      relayer: relayers,
      sweep_transactions: sweeps.length,
      batch_sizes: batchSizes,
      sweep_gas_per_payment: sweptPayments === 0 ? null : Math.round(sweepGas / sweptPayments),
      full_batch: {
        source: fullSource,
        transactions: full.length,
        gas_per_transaction: full.length === 0 ? null : Math.round(fullGas / full.length),
        gas_per_payment: fullPerPayment,
      },
      payer_transfer_to_deposit_address: {
        median: payerGas[Math.floor(payerGas.length / 2)] ?? null,
        max: payerGas.at(-1) ?? null,
      },
      plain_transfer_to_fresh_address: toFresh,
      plain_transfer_to_holder: toHolder,
      sweep_per_payment_vs_plain_transfer_to_holder: ratio(fullPerPayment, toHolder),
      sweep_per_payment_vs_plain_transfer_to_fresh_address: ratio(fullPerPayment, toFresh),
      payer_plus_sweep_vs_plain_transfer_to_holder: ratio(
        fullPerPayment === null ? null : fullPerPayment + (payerGas[Math.floor(payerGas.length / 2)] ?? 0),
        toHolder,
      ),
    },
    all_checks_pass: checksPass,
  };
  const report = details;
  const indexingMs = report.stages.sweep_mined_to_indexed.p99_ms;
  const pairedLimit =
    BLOCK_TIME > 0 && indexingMs !== null
      ? ratioTo(2 * BLOCK_TIME * 1000 + indexingMs, BLOCK_TIME * 1000)
      : null;
  writeResults(
    "payments",
    "npm run bench:payments",
    [
      {
        what: `payments: transfer mined → payment.paid, p99 (${N} at once)`,
        figure: latency.p99_ms,
        unit: "ms",
        // The limit is the block time: a payment cannot be paid before the block after its transfer's.
        baseline: BLOCK_TIME > 0 ? BLOCK_TIME * 1000 : null,
        baseline_what: BLOCK_TIME > 0 ? `the block time (${BLOCK_TIME} s blocks)` : null,
        ratio: BLOCK_TIME > 0 ? ratioTo(latency.p99_ms, BLOCK_TIME * 1000) : null,
        // Issue 48: every payment paid within two blocks (the transfer's and the sweep's) plus the time
        // the indexer takes to index the sweep's block, measured in the same run.
        target:
          pairedLimit === null ? null : `ratio ≤ 2 + indexing ${indexingMs} ms ÷ block time = ${pairedLimit}`,
        meets_target: pairedLimit === null ? null : latency.p99_ms / (BLOCK_TIME * 1000) <= pairedLimit,
      },
      ...(fullPerPayment === null
        ? []
        : [
            {
              what: `gas: sweep per payment, batch of ${SWEEP_BATCH}`,
              figure: fullPerPayment,
              unit: "gas",
              baseline: toHolder,
              baseline_what: "plain ERC-20 transfer to a holder",
              ratio: ratioTo(fullPerPayment, toHolder),
              target: null,
              meets_target: null,
            },
          ]),
    ],
    details,
  );

  const row = (name: string, value: string | number | null) => console.log(`| ${name} | ${value ?? "-"} |`);
  console.log("\n| figure | value |\n|---|---:|");
  row("payments", N);
  row("transfers in blocks", transferBlocks.length);
  row("mined -> payment.paid p50 (ms)", latency.p50_ms);
  row("mined -> payment.paid p99 (ms)", latency.p99_ms);
  row("mined -> payment.paid max (ms)", latency.max_ms);
  row("  stage: mined -> watcher recorded p50 (ms)", report.stages.mined_to_watcher_recorded.p50_ms);
  row(
    "  stage: watcher recorded -> sweep batched p50 (ms)",
    report.stages.watcher_recorded_to_sweep_batched.p50_ms,
  );
  row("  stage: sweep batched -> mined p50 (ms)", report.stages.sweep_batched_to_mined.p50_ms);
  row("  stage: sweep mined -> indexed p50 (ms)", report.stages.sweep_mined_to_indexed.p50_ms);
  row("  stage: indexed -> payment.paid p50 (ms)", report.stages.indexed_to_paid.p50_ms);
  row("all paid, from first send (s)", report.all_paid_seconds.from_first_send);
  row("one payment.paid each", `${checks.payments_with_one_payment_paid}/${N}`);
  row("status paid via API", `${checks.status_paid_via_api}/${N}`);
  row("payout received", `${checks.payout_received_decimal} / ${checks.payout_expected_decimal}`);
  row("sweeps (batch sizes)", `${sweeps.length} (${JSON.stringify(batchSizes)})`);
  row(`sweep gas per payment, batch of ${SWEEP_BATCH}`, fullPerPayment);
  row("payer's transfer to deposit address (median)", report.gas.payer_transfer_to_deposit_address.median);
  row("plain transfer to a fresh address", toFresh);
  row("plain transfer to a holder", toHolder);
  row(
    "sweep per payment / plain transfer to holder",
    report.gas.sweep_per_payment_vs_plain_transfer_to_holder,
  );
  console.log(
    "\n| sweep | batch | gas | batched (ms) | mined (ms) | indexed (ms) | last paid (ms) |\n|---:|---:|---:|---:|---:|---:|---:|",
  );
  for (const [i, t] of timeline.entries())
    console.log(
      `| ${i + 1} | ${t.batch} | ${t.gas} | ${t.batched_ms} | ${t.mined_ms} | ${t.indexed_ms} | ${t.last_paid_ms} |`,
    );
  console.log("(ms after the block of the first transfer arrived)");
  console.log("\nwritten to bench/results/payments.json");
  if (!checksPass) process.exitCode = 1;
} finally {
  await scratch.stop();
}
