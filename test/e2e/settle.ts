/**
 * Settle points: positive markers, reported by the system, that it has processed everything up to a
 * point. A test asserts that nothing (more) happened only after one of these, never after a fixed wait
 * (test/unit/no-sleeps.test.ts keeps sleeps out of test/).
 * - Chain facts to events: `factsRelayed` (the indexer has the block and the fact relay's cursor has
 *   passed every fact of the chain up to it), and `relaySettled`, which first puts a fact of its own on
 *   the chain, so the relay has provably read past everything the test did before.
 * - Workers: `workerPassed`, a whole pass of the worker that began after the call
 *   (`billing_worker_passes_total`).
 * - Webhooks: `deliveriesSettled`, no delivery of the endpoints pending (as the deliveries listing
 *   reports it); count at the receiver after it.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { workerPasses as passesOf, metricValue as readMetric } from "../../scripts/stack/stack-metrics.ts";
import { waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver } from "./chain-driver.ts";
import { api, newAddress, query, stack } from "./helpers.ts";

const SETTLE_MS = 30_000;

/** Whether the indexer has `block` of the chain and the fact relay has read every fact up to it. */
const relayedUpTo = async (chainId: number, block: bigint): Promise<boolean> => {
  // One Ponder relation per statement, as the service reads them (service/chains/onchain.ts). The head
  // comes first: the indexer writes it in the transaction of its block's facts.
  const [head] = await query<{ block: string }>(
    "SELECT block_number::text AS block FROM onchain.chain_head WHERE chain_id = $1",
    [chainId],
  );
  if (head === undefined || BigInt(head.block) < block) return false;
  const [cursor] = await query<{ block: string | null; log_index: number | null; key: string | null }>(
    `SELECT block_number::text AS block, log_index, fact_key AS key FROM billing.fact_relay_cursors
     WHERE chain_id = $1`,
    [chainId],
  );
  // The cursor passes a payee's facts while its backfill runs: they are the backfill's to relay.
  const backfilling = await query<{ payee: string }>(
    "SELECT payee FROM billing.fact_relay_backfills WHERE chain_id = $1 AND done_at IS NULL",
    [chainId],
  );
  const [unread] = await query<{ n: number }>(
    `SELECT count(*)::int AS n FROM onchain.fact f
     WHERE f.chain_id = $1 AND f.block_number <= $2::numeric
       AND ($3::numeric IS NULL OR (f.block_number, f.log_index, f.key) > ($3::numeric, $4::int, $5::text)
            OR lower(f.payee) = ANY ($6::text[]))`,
    [
      chainId,
      block.toString(),
      cursor?.block ?? null,
      cursor?.log_index ?? null,
      cursor?.key ?? null,
      backfilling.map((row) => row.payee),
    ],
  );
  return unread?.n === 0;
};

/**
 * Waits until the indexer has indexed `block` of the chain and the fact relay has read every fact the
 * indexer has of the chain up to that block (relayed it, passed it as no merchant's, or declined it).
 * On a chain with confirmations that needs the indexed head `confirmations` blocks above `block`.
 */
export const factsRelayed = (chainId: number, block: bigint) =>
  waitFor(() => relayedUpTo(chainId, block), {
    timeoutMs: SETTLE_MS,
    intervalMs: 25,
    what: `the indexer and the fact relay to pass block ${block} of chain ${chainId}`,
  });

/**
 * Puts a fact of its own on the chain (a mandate signed to an address no merchant owns, which the relay
 * reads and passes), mines the chain's confirmations on top, and waits until the relay has read it: by
 * then every fact indexed before it has been read too, in a pass that began after the call.
 */
export const relaySettled = async (chainId: number) => {
  const chain = chainDriver(chainId);
  const { tx } = await chain.authorize(privateKeyToAccount(generatePrivateKey()), { payee: newAddress() });
  if (chain.resolved.confirmations > 0) await chain.mine(chain.resolved.confirmations);
  await factsRelayed(chainId, tx.receipt.blockNumber);
  return tx.receipt.blockNumber;
};

const service = () => ({
  apiUrl: stack().apiUrl,
  metricsToken: readFileSync(join(stack().dataDir, "metrics.token"), "utf8").trim(),
});

/** One series of the stack service's /metrics; 0 when absent. */
export const metricValue = (series: string): Promise<number> => readMetric(service(), series);

/** The stack service's count of successful passes of a worker (`billing_worker_passes_total`). */
export const workerPasses = (worker: string): Promise<number> => passesOf(service(), worker);

/**
 * Waits for a whole pass of the stack service's worker that began after the call: the pass under way
 * (if any) ends, and the next one, which began later, ends too.
 */
export const workerPassed = async (worker: string) => {
  const before = await workerPasses(worker);
  await waitFor(async () => (await workerPasses(worker)) >= before + 2, {
    timeoutMs: SETTLE_MS,
    intervalMs: 50,
    what: `two more passes of the worker ${worker}`,
  });
};

/**
 * Waits until no delivery of the endpoints is pending, as their deliveries listings report it: each
 * succeeded or was given up, so a receiver has seen every one it will.
 */
export const deliveriesSettled = (key: string, endpointIds: readonly string[]) =>
  waitFor(
    async () => {
      for (const id of endpointIds) {
        const pending = await api(`/v1/webhook_endpoints/${id}/deliveries?status=pending&limit=1`, { key });
        if (pending.status !== 200) throw new Error(`deliveries of ${id}: ${pending.text}`);
        if ((pending.json.data as unknown[]).length > 0) return false;
      }
      return true;
    },
    { timeoutMs: SETTLE_MS, intervalMs: 50, what: `no pending delivery of ${endpointIds.join(", ")}` },
  );
