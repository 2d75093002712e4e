/**
 * bench:latency's outside world, in a process of its own (bench/latency.ts starts it): a customer
 * authorises `charges` mandates to the merchant's payout address, then an operator charges them one
 * every `intervalMs` and a watcher sees each charge's fact in Ponder's table and its event in the
 * outbox (LISTEN, then a read by key). Kept out of the process that hosts the service: its viem client
 * (sending each charge and polling its receipt) was about 40 % of the bytes promoted in that process's
 * scavenges (LATENCY_HEAP_PROFILE), and its work shared the service's event loop. Tells its parent over
 * IPC when the measured charges start and end; writes what it saw (wall-clock ms) to `resultsFile`.
 */
import { writeFileSync } from "node:fs";
import { PgClient } from "@effect/sql-pg";
import { Duration, Effect, Option, Queue, Redacted } from "effect";
import {
  createPublicClient,
  createWalletClient,
  defineChain,
  encodeFunctionData,
  erc20Abi,
  http,
  type PrivateKeyAccount,
  parseEventLogs,
  parseUnits,
} from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { MandateEscrowAbi } from "../abis/MandateEscrow.ts";
import { usdcAbi } from "../scripts/stack/circle-usdc.ts";
import { LOCAL_DEPLOYER_KEY, LOCAL_FAUCET_KEY } from "../scripts/stack/local-chain.ts";
import { ONCHAIN_SCHEMA } from "../service/db/client.ts";
import { EVENTS_CHANNEL } from "../service/events/outbox.ts";
import { mandateIdFor, TERMS_TYPES } from "../test/contract/harness.ts";
import { pgStatementsLoaded, printStatements, resetStatements } from "./pg-statements.ts";
import { wall } from "./report.ts";

/** What bench/latency.ts passes in LATENCY_LOAD (JSON). */
export interface LatencyLoad {
  readonly rpcUrl: string;
  readonly escrow: `0x${string}`;
  readonly usdc: `0x${string}`;
  readonly payee: `0x${string}`;
  readonly databaseUrl: string;
  readonly charges: number;
  readonly intervalMs: number;
  readonly resultsFile: string;
}

/** Where one charge was when (wall-clock ms). */
export interface SeenCharge {
  readonly chargeId: string;
  readonly factKey: string;
  /** The receipt returned. */
  readonly mined: number;
  /** Its fact seen in Ponder's table. */
  readonly indexed: number;
  /** Its event seen in the outbox. */
  readonly seen: number;
}

const load = JSON.parse(process.env.LATENCY_LOAD ?? "") as LatencyLoad;
const chain = defineChain({
  id: 31337,
  name: "anvil",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [load.rpcUrl] } },
});
const transport = http(load.rpcUrl);
const client = createPublicClient({ chain, transport });
const operator = privateKeyToAccount(LOCAL_DEPLOYER_KEY);
const wallet = (account: PrivateKeyAccount) => createWalletClient({ chain, transport, account });
/**
 * Sends and waits for the receipt, polled every 2 ms. anvil automines each transaction on its own,
 * after answering the send, so no later block may come: viem's `waitForTransactionReceipt`, which
 * looks for the receipt again only on a new block number, once waited out its 180 s in 2,000 sends
 * (the receipt's first lookup came before the block, the block-number watch began after it).
 */
const send = async (account: PrivateKeyAccount, to: `0x${string}`, data: `0x${string}`) => {
  const hash = await wallet(account).sendTransaction({ to, data, gas: 500_000n });
  const deadline = performance.now() + 30_000;
  while (performance.now() < deadline) {
    const receipt = await client.getTransactionReceipt({ hash }).catch(() => undefined);
    if (receipt) return receipt;
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  throw new Error(`no receipt for ${hash} after 30 s`);
};
const { escrow, usdc } = load;

console.log(`preparing ${load.charges} mandates ...`);
const customer = privateKeyToAccount(generatePrivateKey());
await client.request({
  method: "anvil_setBalance",
  params: [customer.address, "0xde0b6b3a7640000"],
} as never);
await send(
  privateKeyToAccount(LOCAL_FAUCET_KEY),
  usdc,
  encodeFunctionData({
    abi: usdcAbi,
    functionName: "mint",
    args: [customer.address, parseUnits("1000000", 6)],
  }),
);
await send(
  customer,
  usdc,
  encodeFunctionData({ abi: erc20Abi, functionName: "approve", args: [escrow, 2n ** 256n - 1n] }),
);
const now = Number((await client.getBlock()).timestamp);
const mandates: `0x${string}`[] = [];
for (let i = 0; i < load.charges; i++) {
  const terms = {
    mandateId: mandateIdFor(customer.address, BigInt(i + 1)),
    payee: load.payee,
    token: usdc,
    cap: parseUnits("10", 6),
    anchor: BigInt(now),
    approvalPeriods: 12,
    operator: operator.address,
    holdSeconds: 0n,
    nonce: 1n,
    deadline: BigInt(now + 86_400),
  };
  const signature = await customer.signTypedData({
    domain: { name: "MandateEscrow", version: "1", chainId: 31337, verifyingContract: escrow },
    types: TERMS_TYPES,
    primaryType: "Terms",
    message: terms,
  });
  await send(
    operator,
    escrow,
    encodeFunctionData({ abi: MandateEscrowAbi, functionName: "authorize", args: [terms, signature] }),
  );
  mandates.push(terms.mandateId);
}

const measured = await Effect.runPromise(
  Effect.scoped(
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient;
      // One queue woken by the outbox's notification and by Ponder's (after each indexed block).
      const wake = yield* Queue.sliding<void>(1);
      for (const channel of [EVENTS_CHANNEL, `${ONCHAIN_SCHEMA}_live_query`]) {
        const notifications = yield* sql.listen(channel);
        yield* Effect.forkScoped(
          Queue.take(notifications).pipe(Effect.andThen(Queue.offer(wake, undefined)), Effect.forever),
        );
      }
      // Measure from a quiet start: the indexer and the relay have caught up with these authorizations.
      // Counted by their own keys: the seeded history holds mandate.authorized events too, and counting
      // by type let the first charges queue behind ~200 blocks Ponder had yet to index (16 s).
      const authorized = mandates.map((id) => `31337:mandate.authorized:${id.toLowerCase()}:1`);
      for (;;) {
        const [row] = yield* sql<{
          n: number;
        }>`SELECT count(*)::int AS n FROM billing.events WHERE fact_key IN ${sql.in(authorized)}`;
        if ((row?.n ?? 0) >= mandates.length) break;
        yield* Effect.sleep("100 millis");
      }
      // And Ponder's JSON-RPC limiter has drained: it allows ~20 requests a second averaged over the
      // last 10 s, which indexing the authorizations (sent back to back) used up, so without a pause one
      // of the first charges (the 5th, in one run) waited ~0.5 s for the next second's budget.
      yield* Effect.sleep("3 seconds");
      yield* Queue.clear(wake);
      if (pgStatementsLoaded()) yield* resetStatements;
      process.send?.("measuring");
      const measured: SeenCharge[] = [];
      for (const mandateId of mandates) {
        const data = encodeFunctionData({
          abi: MandateEscrowAbi,
          functionName: "charge",
          args: [mandateId, parseUnits("1", 6)],
        });
        const paced = performance.now();
        const receipt = yield* Effect.promise(() => send(operator, escrow, data));
        const mined = wall();
        const [charged] = parseEventLogs({
          abi: MandateEscrowAbi,
          eventName: "Charged",
          logs: receipt.logs,
        });
        const chargeId = charged?.args.chargeId.toLowerCase() ?? "";
        const factKey = `31337:charge.succeeded:${chargeId}`;
        let indexed: number | undefined;
        for (;;) {
          // Ponder's own row (the baseline), then the event; both by unique key: a scan by transaction
          // hash would cost the history.
          if (indexed === undefined) {
            const facts = yield* sql`SELECT 1 FROM ${sql(ONCHAIN_SCHEMA)}.fact WHERE key = ${factKey}`;
            if (facts.length > 0) indexed = wall();
          }
          const rows = yield* sql`SELECT 1 FROM billing.events WHERE fact_key = ${factKey}`;
          if (rows.length > 0) break;
          const woke = yield* Queue.take(wake).pipe(Effect.timeoutOption(Duration.seconds(5)));
          if (Option.isNone(woke))
            return yield* Effect.die(new Error(`no event for ${receipt.transactionHash} after 5 s`));
        }
        const seen = wall();
        measured.push({ chargeId, factKey, mined, indexed: indexed ?? seen, seen });
        const rest = load.intervalMs - (performance.now() - paced);
        if (rest > 0) yield* Effect.sleep(Duration.millis(rest));
      }
      process.send?.("measured");
      if (pgStatementsLoaded()) yield* printStatements(`${load.charges} charges`);
      return measured;
    }),
  ).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(load.databaseUrl), maxConnections: 4 }))),
);
writeFileSync(load.resultsFile, JSON.stringify(measured));
process.exit(0);
