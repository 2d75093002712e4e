/**
 * The indexer watchdog on a stack of its own (a frozen indexer would disturb the shared one), with a
 * 5 s stall time: the indexer is frozen (SIGSTOP) while the chain moves on; `/ready` answers 503 naming
 * the chain, `/indexer/live` answers 503, the stall metric is 1; the stack's supervisor restarts the
 * indexer, which catches up, and `/ready` is 200 again with the metric at 0.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rpc } from "../../scripts/stack/anvil.ts";
import { type ScratchStack, startScratchStack } from "../../scripts/stack/scratch-stack.ts";
import type { RunningStack } from "../../scripts/stack/stack.ts";
import { sleep, waitFor } from "../../scripts/stack/wait.ts";

const lines: string[] = [];
let scratch: ScratchStack;
let stack: RunningStack;
let frozen: number | undefined;

beforeAll(async () => {
  scratch = await startScratchStack("watchdog", {
    logLevel: "Error",
    indexerStallSeconds: 5,
    restartStalledIndexer: true,
    onRecovery: (line) => lines.push(line),
  });
  stack = scratch.stack;
});

afterAll(async () => {
  if (frozen !== undefined)
    try {
      process.kill(frozen, "SIGCONT");
    } catch {}
  await scratch?.stop();
});

const readiness = async () => {
  const response = await fetch(`${stack.apiUrl}/ready`, { signal: AbortSignal.timeout(5000) });
  return { status: response.status, body: (await response.json()) as { checks: Record<string, string> } };
};

const stallMetric = async () => {
  const response = await fetch(`${stack.apiUrl}/metrics`, {
    headers: { authorization: `Bearer ${stack.metricsToken}` },
  });
  const line = (await response.text())
    .split("\n")
    .find((l) => l.startsWith('billing_indexer_stalled{chain_id="31337"}'));
  return line === undefined ? undefined : Number(line.split(" ")[1]);
};

describe("indexer watchdog", () => {
  it("reports a frozen indexer as stalled, naming the chain, and the supervisor restarts it", async () => {
    const http = stack.chains[0]?.rpc?.http[0] as string;
    expect((await readiness()).status).toBe(200);
    expect(await stallMetric()).toBe(0);
    const before = stack.ponderPid();

    frozen = before;
    process.kill(before, "SIGSTOP");
    const frozenAt = performance.now();
    // The chain moves on: a block a second while the indexer is frozen.
    let mining = true;
    const miner = (async () => {
      while (mining) {
        await rpc(http, "evm_mine");
        await sleep(1000);
      }
    })();

    try {
      let seen: { status: number; indexer: string; metric: number | undefined; live: number } | undefined;
      await waitFor(
        async () => {
          const ready = await readiness();
          if (!ready.body.checks.indexer?.startsWith("stalled")) return false;
          const live = (await fetch(`${stack.apiUrl}/indexer/live`)).status;
          seen = {
            status: ready.status,
            indexer: ready.body.checks.indexer,
            metric: await stallMetric(),
            live,
          };
          return true;
        },
        { timeoutMs: 30_000, intervalMs: 200, what: "/ready to report the stall" },
      );
      const detectedAfter = performance.now() - frozenAt;
      expect(seen).toEqual({ status: 503, indexer: "stalled: chain 31337", metric: 1, live: 503 });
      // Not before the stall time: the watchdog does not cry wolf.
      expect(detectedAfter).toBeGreaterThanOrEqual(5000);

      // The supervisor restarts the indexer (a new process), which catches up.
      await waitFor(async () => stack.ponderPid() !== before, {
        timeoutMs: 30_000,
        what: "the supervisor to restart the indexer",
      });
      frozen = undefined;
      await waitFor(async () => (await readiness()).status === 200, {
        timeoutMs: 45_000,
        intervalMs: 250,
        what: "/ready 200 after the restart",
      });
      expect(await stallMetric()).toBe(0);
      expect((await fetch(`${stack.apiUrl}/indexer/live`)).status).toBe(200);
      expect(lines.some((line) => line.includes("Indexer stalled on chain 31337"))).toBe(true);
      console.log(`stall reported after ${Math.round(detectedAfter)} ms; ${lines.join(" | ")}`);
    } finally {
      mining = false;
      await miner;
    }

    // The restarted indexer follows the chain again.
    await rpc(http, "evm_mine");
    const target = BigInt((await rpc(http, "eth_blockNumber")) as string);
    await waitFor(
      async () => {
        const text = await (
          await fetch(`${stack.apiUrl}/metrics`, {
            headers: { authorization: `Bearer ${stack.metricsToken}` },
          })
        ).text();
        const line = text
          .split("\n")
          .find((l) => l.startsWith('billing_indexed_head_block{chain_id="31337"}'));
        return line !== undefined && BigInt(line.split(" ")[1] as string) >= target;
      },
      { timeoutMs: 15_000, intervalMs: 250, what: "the restarted indexer to index a new block" },
    );
  });
});
