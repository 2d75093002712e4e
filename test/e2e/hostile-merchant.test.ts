/**
 * Issue 47's hostile merchant, on a stack of its own with the service's real limits (docs/limits.md) and
 * a chain that mines a block a second: merchant B bills 100 subscriptions at a period boundary, once alone
 * and once while merchant A does at the same boundary what the limits are there for: floods `/v1` with
 * reads and payment creations at ten times its key's rate, holds 10,000 open payments (the most a merchant
 * may), pays 1,000 of them with the smallest amount a payment may ask (a 1-unit payment is refused),
 * hammers the pay page with gasless authorizations from many payers, and answers its webhooks never.
 *
 * What is asserted is what the limits promise: A's requests held to its key's rates, its open payments to
 * the limit, each payer to one gasless transfer in flight, A's relayer spending to its share of the hour
 * (the budget is set so that A's sweeps need more than a half and B's needs fit in one), and every one of
 * B's invoices paid and its `invoice.paid` delivered. B's time from the chain passing the boundary to the
 * last delivery is printed alone and attacked, with where it went. It is not asserted to be the same:
 * on one 2-core machine A's deposits, sweeps and events are processed by the same service process, the
 * same Postgres and the same cores as B's boundary, and nothing yet gives one merchant's work priority over
 * another's (docs/limits.md, "A hostile merchant").
 *
 * The attacker's open payments are 8,900 written into the database (what A's key, at its 25 writes a
 * second, would have opened over six minutes) and 1,100 opened through the API, which A pays. The attack
 * itself runs in a worker thread (hostile-attack.ts) and the service in a process of its own, as deployed:
 * neither the attacker's work nor this test's (B's receiver, the pollers) runs on the service's event loop.
 */
import { randomUUID } from "node:crypto";
import { Worker } from "node:worker_threads";
import { createWalletClient, encodeFunctionData, erc20Abi, type Hex, http } from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inPool } from "../../scripts/stack/pool.ts";
import { localChain, type ScratchStack, startScratchStack } from "../../scripts/stack/scratch-stack.ts";
import { seedOpenPayments } from "../../scripts/stack/seeded-payments.ts";
import type { RunningStack } from "../../scripts/stack/stack.ts";
import { metricValue } from "../../scripts/stack/stack-metrics.ts";
import { sleep, waitFor } from "../../scripts/stack/wait.ts";
import { API_LIMIT_DEFAULTS } from "../../service/config/env.ts";
import { testWalletKey } from "../../service/mandates/terms.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import { paySession, signTransferAuthorization } from "./gasless-authorizations.ts";
import {
  type ApiResponse,
  api,
  expectErrorShape,
  newAddress,
  newMerchantWithKey,
  queryAt,
  withDatabase,
} from "./helpers.ts";
import type { AttackOutcome, AttackPlan } from "./hostile-attack.ts";
import { type Received, startReceiver } from "./receiver.ts";

const CHAIN = 31337;
const SUBSCRIPTIONS = 100;
const OPEN_LIMIT = API_LIMIT_DEFAULTS.openPaymentsPerChain;
const PAID_BY_TRANSFER = 1_000;
const TRANSFER_WALLETS = 10;
const GASLESS_PAYERS = 20;
const LINKS_PER_PAYER = 5;
const API_PAYMENTS = PAID_BY_TRANSFER + GASLESS_PAYERS * LINKS_PER_PAYER;
/** A's reads and its payment creations each, requests a second: ten times its key's rate. */
const FLOOD_PER_SECOND = 10 * API_LIMIT_DEFAULTS.testPerSecond;
/** The smallest payment the chain's USDC may ask (docs/limits.md), and what A pays each. */
const MIN_PAYMENT = "0.01";
/**
 * The relayer's budget for the hour on this chain: each merchant's half (5·10^16 wei) holds what B spends
 * in this test (its customers' signatures and three periods' charges: about 3.6·10^16 wei here) and not
 * all of A's sweeps of 1,000 payments and gasless transfers (A is refused at about 4·10^16 spent, while
 * its transactions in flight count at their fee cap).
 */
const BUDGET_WEI = 10n ** 17n;
/** Chain seconds between moving the clock to just before a boundary and moving it past. */
const LEAD_SECONDS = 900;

let scratch: ScratchStack;
let stack: RunningStack;
let chain: ReturnType<typeof chainDriver>;
let query: ReturnType<typeof queryAt>;

beforeAll(async () => {
  scratch = await startScratchStack("hostile-merchant", {
    chains: [
      localChain({
        name: "Hostile merchant chain",
        hold_seconds: 0,
        relayer_budget_wei_per_hour: BUDGET_WEI.toString(),
      }),
    ],
    apiLimits: API_LIMIT_DEFAULTS,
    logLevel: "Error",
    // As deployed: B's receiver and this test's pollers do not share the service's event loop.
    serviceProcess: "child",
  });
  stack = scratch.stack;
  chain = chainDriver(CHAIN, stack.chainsFile);
  query = queryAt(stack.databaseUrl);
}, 180_000);

afterAll(async () => {
  await scratch?.stop();
});

/**
 * A merchant's calls as a client library makes them: on 429 it waits the `Retry-After` seconds and asks
 * again (nothing was done: a fresh idempotency key is fine), as Stripe's libraries do.
 */
const clientOf =
  (key: string) =>
  async (path: string, body?: unknown): Promise<ApiResponse> => {
    for (;;) {
      const answer = await api(path, { key, baseUrl: stack.apiUrl, ...(body === undefined ? {} : { body }) });
      if (answer.status !== 429) return answer;
      await sleep(Number(answer.headers.get("retry-after") ?? "1") * 1000);
    }
  };

/** Answers counted by status and error code, e.g. `429 rate_limited`, or `no answer`. */
const tally = () => {
  const counts: Record<string, number> = {};
  return {
    counts,
    add: (answer: { status: number; json?: unknown }) => {
      const code = (answer.json as { error?: { code?: string } } | undefined)?.error?.code;
      const name =
        answer.status === 0
          ? "no answer"
          : code === undefined
            ? String(answer.status)
            : `${answer.status} ${code}`;
      counts[name] = (counts[name] ?? 0) + 1;
    },
  };
};

/** The distinct `invoice.paid` events an endpoint received, each with when it first arrived. */
const invoicesPaidAt = (received: readonly Received[]) => {
  const first = new Map<string, number>();
  for (const r of received)
    if (r.event.type === "invoice.paid" && !first.has(r.event.id)) first.set(r.event.id, r.at);
  return first;
};

describe("a hostile merchant and an honest one at the same boundary", () => {
  it("holds the attacker to its limits and bills all of the honest merchant's 100 subscriptions", async () => {
    // B: the stack's merchant, 100 subscriptions whose customers signed their mandates; every
    // invoice.paid delivered to an endpoint of its own.
    const b = clientOf(stack.devMerchant.apiKey);
    const bReceiver = await startReceiver();
    const aReceiver = await startReceiver(() => "hang");
    try {
      expect(
        (await b("/v1/webhook_endpoints", { url: bReceiver.url, events: ["invoice.paid"] })).status,
      ).toBe(200);
      const price = await b("/v1/prices", { product_name: "Seat", amount_decimal: "1", chain: CHAIN });
      expect(price.status, price.text).toBe(200);
      const subscriptions = await inPool(
        Array.from({ length: SUBSCRIPTIONS }, (_, i) => i),
        4,
        async (i) => {
          const sub = await b("/v1/subscriptions", { customer: `cus_b_${i}`, price: price.json.id });
          expect(sub.status, sub.text).toBe(200);
          // The customer's wallet holds the token as a real one would (not through the relayer).
          await chain.mint(privateKeyToAccount(testWalletKey(sub.json.mandate)).address, usd("10"));
          const signed = await b(`/v1/test/mandates/${sub.json.mandate}/authorize`, {});
          expect(signed.status, signed.text).toBe(200);
          return sub.json.id as string;
        },
      );
      const paidInvoices = async () =>
        Number(
          (
            await query<{ n: string }>(
              "SELECT count(*)::text AS n FROM billing.invoices WHERE subscription_id = ANY($1) AND status = 'paid'",
              [subscriptions],
            )
          )[0]?.n,
        );
      const allPaid = async (periods: number) => {
        await waitFor(
          async () =>
            (await paidInvoices()) === periods * SUBSCRIPTIONS &&
            invoicesPaidAt(bReceiver.received).size === periods * SUBSCRIPTIONS,
          {
            timeoutMs: 300_000,
            intervalMs: 100,
            what: `${periods * SUBSCRIPTIONS} invoices paid and delivered`,
          },
        );
      };
      await allPaid(1);

      /** Moves the chain's clock to LEAD_SECONDS before B's next boundary (every subscription's next invoice). */
      const nextBoundary = async () => {
        const list = await b(`/v1/subscriptions?limit=${SUBSCRIPTIONS}`);
        const times = (list.json.data as Array<{ next_billing_at: number }>).map((s) => s.next_billing_at);
        expect(times).toHaveLength(SUBSCRIPTIONS);
        const last = Math.max(...times);
        const before = Math.min(...times) - LEAD_SECONDS - (await chain.latestTime());
        expect((await b("/v1/test/clock/advance", { seconds: before })).status).toBe(200);
        return last;
      };
      /**
       * Moves the clock past the boundary and waits for every invoice of the period paid and delivered:
       * the seconds from the block that passed the boundary first seen mined to the last delivery's
       * arrival (how long B's own request to move the clock took is reported apart).
       */
      const billBoundary = async (last: number, periods: number) => {
        const delivered = new Set(invoicesPaidAt(bReceiver.received).keys());
        const startBlock = await chain.client.getBlockNumber({ cacheTime: 0 });
        const started = Date.now();
        // When each block was first seen mined and indexed, ms after the move.
        const minedAt = new Map<bigint, number>();
        const indexedAt = new Map<bigint, number>();
        let watching = true;
        const watcher = (async () => {
          while (watching) {
            const [mined, [indexed]] = await Promise.all([
              chain.client.getBlockNumber({ cacheTime: 0 }),
              query<{ head: string | null }>(
                "SELECT max(block_number)::text AS head FROM onchain.chain_head",
              ),
            ]);
            if (!minedAt.has(mined)) minedAt.set(mined, Date.now() - started);
            const head = indexed?.head == null ? undefined : BigInt(indexed.head);
            if (head !== undefined && !indexedAt.has(head)) indexedAt.set(head, Date.now() - started);
            await sleep(50);
          }
        })();
        const move = last + 1 - (await chain.latestTime());
        const requestedAt = Date.now();
        expect((await b("/v1/test/clock/advance", { seconds: move })).status).toBe(200);
        const movedAt = Date.now();
        await allPaid(periods);
        watching = false;
        await watcher;
        const firstSeen = (seen: Map<bigint, number>, block: bigint | undefined) => {
          if (block === undefined) return null;
          const later = [...seen].filter(([n]) => n >= block).map(([, ms]) => ms);
          return later.length === 0 ? null : Math.min(...later) / 1000;
        };
        const arrivals = [...invoicesPaidAt(bReceiver.received)]
          .filter(([id]) => !delivered.has(id))
          .map(([, at]) => at);
        expect(arrivals).toHaveLength(SUBSCRIPTIONS);
        // The block that passed the boundary (the move's, the first at or after it), and when it was first
        // seen mined: B's boundary starts there, not when B's request to move the clock was answered.
        let boundaryBlock = startBlock + 1n;
        while ((await chain.client.getBlock({ blockNumber: boundaryBlock })).timestamp <= BigInt(last))
          boundaryBlock++;
        const boundaryAt = firstSeen(minedAt, boundaryBlock);
        expect(boundaryAt).not.toBeNull();
        const lastArrival = (Math.max(...arrivals) - started) / 1000;
        const seconds = lastArrival - (boundaryAt ?? 0);
        // Where the time went: the last invoice written, B's last relayer transaction recorded (and how
        // many sends its transactions took: more than one is a fee bump), the last invoice paid.
        const [stage] = await query<{
          invoiced: number;
          sent: number;
          succeeded: number;
          paid: number;
          sends: string;
          charge_block: string | null;
        }>(
          `SELECT (SELECT max(block_number)::text FROM billing.charges
                    WHERE merchant_id = $3 AND created_at >= to_timestamp($2)) AS charge_block,
                  (SELECT extract(epoch FROM max(inserted_at)) FROM billing.events
                    WHERE merchant_id = $3 AND type = 'charge.succeeded' AND inserted_at >= to_timestamp($2))::float8 AS succeeded,
                  (SELECT extract(epoch FROM max(created_at)) FROM billing.invoices
                    WHERE subscription_id = ANY ($1) AND created_at >= to_timestamp($2))::float8 AS invoiced,
                  (SELECT extract(epoch FROM max(created_at)) FROM billing.relayer_transactions
                    WHERE $3 = ANY (merchant_ids) AND created_at >= to_timestamp($2))::float8 AS sent,
                  (SELECT extract(epoch FROM max(updated_at)) FROM billing.invoices
                    WHERE subscription_id = ANY ($1) AND status = 'paid' AND created_at >= to_timestamp($2))::float8 AS paid,
                  (SELECT string_agg(cardinality(hashes)::text, ',') FROM billing.relayer_transactions
                    WHERE $3 = ANY (merchant_ids) AND created_at >= to_timestamp($2)) AS sends`,
          [subscriptions, started / 1000, stack.devMerchant.merchantId],
        );
        // Seconds after the boundary was first seen mined.
        const from = (ms: number) => Math.round((ms - started - (boundaryAt ?? 0) * 1000) / 10) / 100;
        const at = (epoch: number | undefined) =>
          epoch === undefined || epoch === null ? null : from(epoch * 1000);
        const since = (seen: number | null) => (seen === null ? null : from(started + seen * 1000));
        // B's charge transactions, and what the relayer sent before them in nonce order since the move
        // (their kind and block): whether B's charge waited for the relayer's earlier transactions or
        // for room in a block.
        const relayed = await query<{
          nonce: string;
          kind: string;
          b: boolean;
          created: number;
          broadcast: number;
          block: string | null;
          held: string | null;
        }>(
          `SELECT nonce::text, split_part(purpose, ':', 1) AS kind, $2 = ANY (merchant_ids) AS b,
                  extract(epoch FROM created_at)::float8 AS created,
                  extract(epoch FROM last_broadcast_at)::float8 AS broadcast,
                  block_number::text AS block, held_reason AS held
             FROM billing.relayer_transactions
            WHERE created_at >= to_timestamp($1) AND carrier_id IS NULL ORDER BY nonce`,
          [started / 1000, stack.devMerchant.merchantId],
        );
        const ofB = relayed.filter((row) => row.b);
        const lastOfB = ofB.at(-1);
        const before = relayed.filter((row) => !row.b && Number(row.nonce) < Number(lastOfB?.nonce ?? 0));
        const chargeBlock = stage?.charge_block == null ? undefined : BigInt(stage.charge_block);
        const blocks = [];
        if (chargeBlock !== undefined)
          for (let n = startBlock + 1n; n <= chargeBlock; n++) {
            const block = await chain.client.getBlock({ blockNumber: n });
            blocks.push(`${n - startBlock}:${block.transactions.length}tx/${Number(block.gasUsed) / 1e6}M`);
          }
        // Where B's charges stood in their blocks: behind how many of A's transfers.
        const chargeTransactions = await query<{ tx_hash: string }>(
          `SELECT DISTINCT tx_hash FROM billing.charges
            WHERE merchant_id = $1 AND created_at >= to_timestamp($2) AND tx_hash IS NOT NULL`,
          [stack.devMerchant.merchantId, started / 1000],
        );
        const positions = await Promise.all(
          chargeTransactions.map(async ({ tx_hash }) => {
            const receipt = await chain.client.getTransactionReceipt({ hash: tx_hash as Hex });
            const block = await chain.client.getBlock({ blockNumber: receipt.blockNumber });
            return `${receipt.transactionIndex + 1} of ${block.transactions.length}`;
          }),
        );
        return {
          seconds,
          stages: {
            clock_request_seconds: (movedAt - requestedAt) / 1000,
            clock_answered: from(movedAt),
            boundary_indexed: since(firstSeen(indexedAt, boundaryBlock)),
            invoiced: at(stage?.invoiced),
            charge_sent: at(stage?.sent),
            charge_mined: since(firstSeen(minedAt, chargeBlock)),
            charge_indexed: since(firstSeen(indexedAt, chargeBlock)),
            charge_succeeded: at(stage?.succeeded),
            paid: at(stage?.paid),
            first_delivered: from(Math.min(...arrivals)),
            delivered: Math.round(seconds * 100) / 100,
            relayer_sends: stage?.sends,
            b_charges_in_block: positions,
            b_charges: ofB.map((row) => ({
              nonce: Number(row.nonce),
              created: at(row.created),
              broadcast: at(row.broadcast),
              blocks_after_move: row.block === null ? null : Number(BigInt(row.block) - startBlock),
              held: row.held,
            })),
            relayed_before_b: before.map(
              (row) => `${row.kind}@${row.block === null ? "-" : Number(BigInt(row.block) - startBlock)}`,
            ),
            blocks_until_b_charged: blocks,
          },
        };
      };

      // A's wallets, funded now (one transaction a block until the chain mines on a clock): ten paying
      // 100 payments each by plain transfers, twenty signing gasless authorizations of the smallest
      // payment for five payment links each, holding enough for one.
      const wallets: PrivateKeyAccount[] = [];
      for (let i = 0; i < TRANSFER_WALLETS; i++)
        wallets.push(
          await chain.newCustomer(usd(MIN_PAYMENT) * BigInt(PAID_BY_TRANSFER / TRANSFER_WALLETS), {
            approve: false,
          }),
        );
      const payers: PrivateKeyAccount[] = [];
      for (let i = 0; i < GASLESS_PAYERS; i++) {
        const payer = privateKeyToAccount(generatePrivateKey());
        await chain.mint(payer.address, usd(MIN_PAYMENT));
        payers.push(payer);
      }

      // From here the chain mines a block a second, as a real one does on its own clock: the attacker's
      // transactions share blocks with B's charges instead of each making a block of its own.
      await chain.rpc("evm_setAutomine", [false]);
      await chain.rpc("evm_setIntervalMining", [1]);

      // Alone.
      const aloneRun = await billBoundary(await nextBoundary(), 2);
      const alone = aloneRun.seconds;

      // A: a merchant of its own with a test key, a payout address and an endpoint that never answers.
      const a = await newMerchantWithKey("test", stack.databaseUrl);
      const aCall = clientOf(a.key);
      const payout = newAddress();
      expect((await aCall("/v1/merchant/chains", { chain: CHAIN, payout_address: payout })).status).toBe(200);
      expect(
        (
          await aCall("/v1/webhook_endpoints", {
            url: aReceiver.url,
            events: ["payment.paid", "payment.underpaid"],
          })
        ).status,
      ).toBe(200);

      const last = await nextBoundary();
      // A's open payments: 8,900 written, 1,100 through its key, which fill the merchant's limit.
      const made = await inPool(
        Array.from({ length: API_PAYMENTS }, () => 0),
        4,
        async () => {
          const payment = await aCall("/v1/payments", { amount_decimal: MIN_PAYMENT, expires_in: 86_400 });
          expect(payment.status, payment.text).toBe(200);
          return payment.json as { id: string; address: Hex; payment_url: string };
        },
      );
      const [terms] = await query<{ payee: string; operator: string; token: string }>(
        "SELECT payee_address AS payee, operator_address AS operator, token_address AS token FROM billing.payments WHERE id = $1",
        [made[0]?.id],
      );
      if (terms === undefined) throw new Error("A's payment is not in the database");
      const head = await chain.client.getBlock();
      await withDatabase(
        stack.databaseUrl,
        seedOpenPayments({
          merchantId: a.merchantId,
          chainId: CHAIN,
          token: terms.token,
          payee: terms.payee,
          operator: terms.operator,
          amount: usd(MIN_PAYMENT),
          expiresAt: Number(head.timestamp) + 86_400,
          createdBlock: head.number,
          first: 1,
          count: OPEN_LIMIT - API_PAYMENTS,
          salt: randomUUID(),
        }),
      );
      const openOfA = async () =>
        Number(
          (
            await query<{ n: string }>(
              "SELECT count(*)::text AS n FROM billing.payments WHERE merchant_id = $1 AND status IN ('requires_payment', 'processing')",
              [a.merchantId],
            )
          )[0]?.n,
        );
      expect(await openOfA()).toBe(OPEN_LIMIT);

      const byTransfer = made.slice(0, PAID_BY_TRANSFER);
      const byAuthorization = made.slice(PAID_BY_TRANSFER);
      const authorizations = await inPool(byAuthorization, 4, async (payment) => {
        const index = byAuthorization.indexOf(payment);
        const payer = payers[Math.floor(index / LINKS_PER_PAYER)] as PrivateKeyAccount;
        return {
          payment,
          payer: payer.address,
          body: await signTransferAuthorization(payer, await paySession(payment.payment_url)),
        };
      });

      // Each wallet's 100 transfers, signed beforehand (the attacker's own work), broadcast at once in
      // nonce order and mined together.
      const fees = await chain.client.estimateFeesPerGas();
      const firstNonces: number[] = [];
      const signedTransfers = await Promise.all(
        wallets.map(async (account, w) => {
          const wallet = createWalletClient({
            account,
            chain: chain.client.chain,
            transport: http(chain.resolved.rpc.http[0]),
          });
          const first = await chain.client.getTransactionCount({ address: account.address });
          firstNonces[w] = first;
          const raws: Hex[] = [];
          for (let i = w; i < byTransfer.length; i += TRANSFER_WALLETS)
            raws.push(
              await wallet.signTransaction({
                to: chain.usdc,
                data: encodeFunctionData({
                  abi: erc20Abi,
                  functionName: "transfer",
                  args: [(byTransfer[i] as (typeof byTransfer)[number]).address, usd(MIN_PAYMENT)],
                }),
                nonce: first + raws.length,
                gas: 100_000n,
                maxFeePerGas: fees.maxFeePerGas * 4n,
                maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
              }),
            );
          return raws;
        }),
      );

      // A payment of 1 base unit is refused.
      const tiny = await aCall("/v1/payments", { amount_decimal: "0.000001" });

      // The attack, all at once from a thread of its own, and B's boundary in the middle of it.
      const plan: AttackPlan = {
        apiUrl: stack.apiUrl,
        key: a.key,
        rpcUrl: chain.resolved.rpc.http[0] ?? "",
        floodPerSecond: FLOOD_PER_SECOND,
        amountDecimal: MIN_PAYMENT,
        transfers: signedTransfers,
        authorizations: authorizations.map(({ payment, body }) => ({ url: payment.payment_url, body })),
      };
      const attacker = new Worker(new URL("./hostile-attack.ts", import.meta.url), { workerData: plan });
      const outcome = new Promise<AttackOutcome>((resolve, reject) => {
        attacker.once("message", resolve);
        attacker.once("error", reject);
      });
      const attackedRun = await billBoundary(last, 3);
      const attacked = attackedRun.seconds;
      attacker.postMessage("stop");
      const attackOutcome = await outcome;
      await attacker.terminate();
      const attackSeconds = attackOutcome.seconds;
      const reads = tally();
      const writes = tally();
      for (const answer of attackOutcome.reads) reads.add(answer);
      for (const answer of attackOutcome.writes) writes.add(answer);
      // Mined: each wallet's nonce past its last transfer (read a few times a second: a thousand
      // receipts polled at once would load the chain and this process more than the attack does).
      await waitFor(
        async () =>
          (
            await Promise.all(
              wallets.map(
                async (account, w) =>
                  (await chain.client.getTransactionCount({ address: account.address })) >=
                  (firstNonces[w] ?? 0) + (signedTransfers[w]?.length ?? 0),
              ),
            )
          ).every(Boolean),
        { timeoutMs: 120_000, intervalMs: 250, what: "A's transfers mined" },
      );
      const posted = authorizations.map(({ payer }, i) => ({
        payer,
        answer: attackOutcome.gasless[i] ?? { status: 0 },
      }));

      const answers = tally();
      const admittedByPayer = new Map<string, number>();
      for (const { payer, answer } of posted) {
        answers.add(answer);
        if (answer.status === 200) admittedByPayer.set(payer, (admittedByPayer.get(payer) ?? 0) + 1);
      }

      // A's deposits recorded by the watcher (its 1,000 transfers and the gasless transfers relayed),
      // then its sweeps until the share refuses one: the watcher takes a while to record a thousand
      // transfers while the rest of the attack runs, and in one run the test had ended before it had.
      const relayedGasless = posted.filter(({ answer }) => answer.status === 200).length;
      await waitFor(
        async () =>
          Number(
            (
              await query<{ n: string }>(
                "SELECT count(*)::text AS n FROM billing.payments WHERE merchant_id = $1 AND status IN ('processing', 'paid')",
                [a.merchantId],
              )
            )[0]?.n,
          ) >=
          PAID_BY_TRANSFER + relayedGasless,
        { timeoutMs: 180_000, intervalMs: 250, what: "A's deposits recorded" },
      );
      const refusals = () => metricValue(stack, `billing_relayer_share_refusals_total{chain_id="${CHAIN}"}`);
      await waitFor(async () => (await refusals()) > 0, {
        timeoutMs: 180_000,
        intervalMs: 250,
        what: "A's sweeps refused at its share",
      });

      // The relayer, once nothing it sent is pending: what each merchant's transactions took of the hour.
      await waitFor(
        async () =>
          (
            await query<{ n: string }>(
              "SELECT count(*)::text AS n FROM billing.relayer_transactions WHERE chain_id = $1 AND status = 'pending'",
              [CHAIN],
            )
          )[0]?.n === "0",
        { timeoutMs: 120_000, intervalMs: 200, what: "the relayer's transactions mined" },
      );
      const relayerOf = async (merchantId: string) => {
        const [row] = await query<{ transactions: string; paid_wei: string; budget_wei: string }>(
          `SELECT (SELECT count(*) FROM billing.relayer_transactions
                    WHERE chain_id = $1 AND $2 = ANY (merchant_ids) AND status IN ('mined', 'reverted'))::text AS transactions,
                  (SELECT coalesce(sum(spent_wei), 0) FROM billing.relayer_transactions
                    WHERE chain_id = $1 AND $2 = ANY (merchant_ids))::text AS paid_wei,
                  (SELECT coalesce(sum(wei), 0) FROM billing.relayer_merchant_spending
                    WHERE chain_id = $1 AND merchant_id = $2 AND minute >= now() - interval '61 minutes')::text AS budget_wei`,
          [CHAIN, merchantId],
        );
        if (row === undefined) throw new Error("no relayer figures");
        return row;
      };
      const share = BUDGET_WEI / 2n;
      const relayerA = await relayerOf(a.merchantId);
      const relayerB = await relayerOf(stack.devMerchant.merchantId);
      const shareRefusals = await refusals();
      const paymentsOfA = Object.fromEntries(
        (
          await query<{ status: string; n: string }>(
            "SELECT status, count(*)::text AS n FROM billing.payments WHERE merchant_id = $1 GROUP BY status ORDER BY status",
            [a.merchantId],
          )
        ).map((row) => [row.status, Number(row.n)]),
      );
      const figures = {
        b_boundary_seconds: { alone, attacked, ratio: attacked / alone },
        b_stages: { alone: aloneRun.stages, attacked: attackedRun.stages },
        attack_seconds: attackSeconds,
        a_reads: reads.counts,
        a_writes: writes.counts,
        a_gasless_posts: answers.counts,
        a_payments: paymentsOfA,
        relayer: {
          budget_wei_per_hour: BUDGET_WEI.toString(),
          share_wei: share.toString(),
          share_refusals: shareRefusals,
          a: relayerA,
          b: relayerB,
        },
      };
      console.log(`hostile merchant: ${JSON.stringify(figures)}`);

      // B: every invoice paid and delivered (billBoundary, alone and attacked).
      // A's reads and writes were held to its key's rates (a bucket of a second's worth, refilled each
      // second); its open payments never passed the limit; a 1-unit payment was refused.
      const rate = API_LIMIT_DEFAULTS.testPerSecond;
      const admitted = (counts: Record<string, number>) =>
        Object.entries(counts).reduce(
          (sum, [name, n]) => (name.startsWith("429") || name === "no answer" ? sum : sum + n),
          0,
        );
      expect(reads.counts["429 rate_limited"]).toBeGreaterThan(0);
      expect(admitted(reads.counts)).toBeLessThanOrEqual(rate * (attackSeconds + 1));
      expect(writes.counts["429 rate_limited"]).toBeGreaterThan(0);
      expect(admitted(writes.counts)).toBeLessThanOrEqual(rate * (attackSeconds + 1));
      expect([tiny.status, expectErrorShape(tiny.json).code]).toEqual([400, "amount_too_small"]);
      expect(writes.counts["400 open_payments_limit_reached"]).toBeGreaterThan(0);
      expect(await openOfA()).toBeLessThanOrEqual(OPEN_LIMIT);
      // Every transfer went through: each wallet held exactly its 100 payments' worth.
      for (const account of wallets) expect(await chain.balanceOf(account.address)).toBe(0n);
      // Each payer got at most one gasless transfer admitted; the others were refused in the one shape.
      expect(Math.max(0, ...admittedByPayer.values())).toBeLessThanOrEqual(1);
      for (const { answer } of posted) if (answer.status !== 200) expectErrorShape(answer.json);
      // A's part of the hour stayed within its share, and the share held A back; B's needs fitted in its.
      expect(BigInt(relayerA.budget_wei)).toBeLessThanOrEqual(share);
      expect(BigInt(relayerB.budget_wei)).toBeLessThanOrEqual(share);
      expect(shareRefusals).toBeGreaterThan(0);
    } finally {
      await Promise.all([bReceiver.close(), aReceiver.close()]);
    }
  }, 900_000);
});
