/**
 * Ctrl-C while `npm start` is still starting: the start stops what it has started (Postgres, anvil,
 * the indexer if it got that far) and the process exits, leaving nothing running. Before, the signal
 * handlers came only with the ready banner, so a Ctrl-C during the start ended the supervisor alone
 * and left Postgres, anvil and Ponder behind.
 */
import { spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { rpc } from "../../scripts/stack/anvil.ts";
import { alive } from "../../scripts/stack/processes.ts";
import { localChain, scratchDir } from "../../scripts/stack/scratch-stack.ts";
import { freePort, waitFor } from "../../scripts/stack/wait.ts";

const scratch = scratchDir("interrupt");
afterAll(() => scratch.remove());

it("stops everything it started when interrupted before it is ready", async () => {
  const { dataDir, chainsConfig } = scratch;
  const [port, pgPort, anvilPort] = [await freePort(), await freePort(), await freePort()];
  writeFileSync(chainsConfig, JSON.stringify({ chains: [localChain({ local: { port: anvilPort } })] }));
  const child = spawn(process.execPath, ["scripts/start.ts"], {
    env: {
      ...process.env,
      DATA_DIR: dataDir,
      CHAINS_CONFIG: chainsConfig,
      PORT: String(port),
      PG_PORT: String(pgPort),
      LOG_LEVEL: "warn",
    },
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  let output = "";
  for (const stream of [child.stdout, child.stderr]) stream?.on("data", (chunk: Buffer) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));

  // Postgres and anvil are up and the chain is deployed; the indexer and the service are still to come.
  const resolved = join(dataDir, "chains.resolved.json");
  await waitFor(async () => existsSync(resolved), { timeoutMs: 120_000, intervalMs: 20, what: "the chains" });
  const postmaster = Number.parseInt(
    readFileSync(join(dataDir, "postgres", "postmaster.pid"), "utf8").split("\n")[0] ?? "",
    10,
  );
  const anvil = `http://127.0.0.1:${anvilPort}`;
  expect(alive(postmaster)).toBe(true);
  expect(await rpc(anvil, "eth_chainId")).toBe("0x7a69");

  child.kill("SIGINT");
  expect(await exited).toBe(0);
  expect(output).not.toContain("Ready in");
  expect(output).toContain("Stopped.");
  expect(alive(postmaster)).toBe(false);
  await expect(rpc(anvil, "eth_chainId")).rejects.toThrow();
}, 180_000);
