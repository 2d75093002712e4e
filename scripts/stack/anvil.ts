/**
 * A local chain: the anvil binary shipped by the @foundry-rs/anvil npm package, started directly
 * (not through npx, whose parent process would leave anvil orphaned) and stopped by its own pid.
 */
import { spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { abandoned, claim, removeQuietly, signalRecorded } from "./abandoned.ts";
import { stopChild, supervise, untilReady } from "./processes.ts";
import { waitFor } from "./wait.ts";

const require = createRequire(import.meta.url);

export const anvilBinary = (): string =>
  join(dirname(require.resolve("@foundry-rs/anvil-linux-amd64/package.json")), "bin", "anvil");

export interface RunningAnvil {
  readonly http: string;
  readonly ws: string;
  readonly pid: number;
  mine(): Promise<void>;
  stop(): Promise<void>;
}

export const rpc = async (url: string, method: string, params: unknown[] = []): Promise<unknown> => {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
  });
  const body = (await response.json()) as { result?: unknown; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result;
};

const rpcAnswers = (url: string): Promise<boolean> =>
  rpc(url, "eth_chainId").then(
    () => true,
    () => false,
  );

const parses = (file: string): boolean => {
  try {
    JSON.parse(readFileSync(file, "utf8"));
    return true;
  } catch {
    return false;
  }
};

/**
 * anvil rewrites its state file in place, so a SIGKILL in the middle of a save leaves half a file that
 * it then refuses to load. Keep a copy of the last file that parsed, and fall back to it (the chain is
 * then older than what was recorded from it, which chain-recovery.ts detects and repairs).
 */
const usableStateFile = (file: string): void => {
  if (!existsSync(file)) return;
  const backup = `${file}.last-good`;
  if (parses(file)) {
    copyFileSync(file, `${backup}.tmp`);
    renameSync(`${backup}.tmp`, backup);
    return;
  }
  renameSync(file, `${file}.unreadable-${Date.now()}`);
  if (existsSync(backup)) copyFileSync(backup, file);
  console.log(
    `state file ${file} was cut short; ${existsSync(file) ? "using the last good copy" : "starting a new chain"}`,
  );
};

const STATES_PREFIX = "anvil-states-";

/**
 * anvil moves older block states to disk, by default under ~/.foundry/anvil/tmp, and removes them only
 * when it exits cleanly: every anvil killed left up to a GB there (69 GB after a few days of test runs).
 * Each anvil gets its own directory instead (`--cache-path`), removed when it exits however it exits;
 * one whose creator died with it still running is stopped and removed at the next anvil's start.
 */
const statesDirectory = (): string => {
  for (const dir of abandoned(STATES_PREFIX)) {
    signalRecorded(join(dir, "anvil.pid"), /anvil/, "SIGINT");
    removeQuietly(dir);
  }
  const dir = mkdtempSync(join(tmpdir(), STATES_PREFIX));
  claim(dir);
  return dir;
};

export const startAnvil = async (options: {
  readonly port: number;
  readonly chainId: number;
  /** Keeps the chain across restarts: loaded at start, dumped on exit and every few seconds. */
  readonly stateFile?: string;
  /** With `stateFile`: seconds between two saves of the state (anvil's --state-interval). */
  readonly stateSaveSeconds?: number;
  /** Mine every N seconds, like a real chain; default: mine on each transaction. */
  readonly blockTime?: number;
  /** Record every opcode, for `debug_traceTransaction` struct logs (bench/gas-trace.ts). */
  readonly stepsTracing?: boolean;
  /**
   * Mine each block at a cost that does not grow with the chain's state, as a real node's does (long
   * benchmarks). anvil's own in-memory database recomputes the root of the whole state trie at every
   * block and copies the whole state into its history: measured on anvil 1.7.1, an empty block took
   * 25 ms of CPU with 10,000 accounts and 10,000 storage slots, 256 ms with 100,000 of each and 1.1 s
   * with 300,000 (bench:billing at 100,000 due spent 46% of the two cores in anvil). Forked from an empty
   * anvil of the same chain id, anvil keeps the state in its fork database, whose root it leaves unset,
   * and with a bare `--prune-history` keeps no past states: 0-2 ms a block at every size above. The
   * blocks' `stateRoot` is then zero and calls at past blocks fail; the service and Ponder read only the
   * latest and pending states.
   */
  readonly flatBlockCost?: { readonly upstreamPort: number };
  /** Start without the deterministic-deployment proxy anvil otherwise preinstalls (as many real chains are). */
  readonly withoutCreate2Proxy?: boolean;
  readonly onOutput?: (line: string) => void;
  /** Stops waiting for the node, and stops the node, when aborted. */
  readonly signal?: AbortSignal | undefined;
}): Promise<RunningAnvil> => {
  const args = ["--host", "127.0.0.1", "--port", String(options.port), "--chain-id", String(options.chainId)];
  if (options.blockTime) args.push("--block-time", String(options.blockTime));
  if (options.stepsTracing) args.push("--steps-tracing");
  if (options.withoutCreate2Proxy) args.push("--disable-default-create2-deployer");
  if (options.stateFile) {
    usableStateFile(options.stateFile);
    const interval = String(options.stateSaveSeconds ?? 5);
    args.push("--state", options.stateFile, "--state-interval", interval, "--preserve-historical-states");
  }
  const url = `http://127.0.0.1:${options.port}`;
  if (await rpcAnswers(url))
    throw new Error(`port ${options.port} already has a node on it (another stack still running?)`);
  let upstream: RunningAnvil | undefined;
  if (options.flatBlockCost) {
    upstream = await startAnvil({
      port: options.flatBlockCost.upstreamPort,
      chainId: options.chainId,
      ...(options.withoutCreate2Proxy ? { withoutCreate2Proxy: true } : {}),
      ...(options.onOutput ? { onOutput: options.onOutput } : {}),
      signal: options.signal,
    });
    args.push("--fork-url", upstream.http, "--prune-history");
  }
  const states = statesDirectory();
  args.push("--cache-path", states);
  // Own process group: Ctrl-C reaches only the supervisor, which stops the stack in order.
  const child = spawn(anvilBinary(), args, { stdio: ["ignore", "pipe", "pipe"], detached: true });
  child.once("exit", () => removeQuietly(states));
  child.once("error", () => removeQuietly(states));
  if (child.pid !== undefined) writeFileSync(join(states, "anvil.pid"), `${child.pid}\n`);
  const supervised = supervise(child, "anvil", options.onOutput);
  const http = `http://127.0.0.1:${options.port}`;
  // SIGINT lets anvil dump its state file before it exits.
  const stop = async () => {
    await stopChild(child, "SIGINT", 10_000);
    await upstream?.stop();
  };
  await untilReady(
    waitFor(() => rpcAnswers(http), {
      timeoutMs: 20_000,
      what: `anvil on ${http}`,
      signal: options.signal,
    }),
    supervised,
    stop,
  );
  return {
    http,
    ws: `ws://127.0.0.1:${options.port}`,
    pid: child.pid ?? -1,
    mine: async () => {
      await rpc(http, "evm_mine");
    },
    stop,
  };
};
