/**
 * Throwaway stacks on local chains, each in a fresh temporary directory: for the benchmarks, the fuzzer
 * and the e2e tests that need a stack of their own (to kill, freeze or restart parts of it).
 */
import { lstatSync, mkdtempSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChainConfig } from "../../service/chains/config.ts";
import { API_LIMIT_DEFAULTS } from "../../service/config/env.ts";
import { abandoned, claim, removeQuietly } from "./abandoned.ts";
import { removePostgresData, stopStalePostmaster } from "./postgres-paths.ts";
import { type RunningStack, type StackOptions, startStack, stopLeftovers } from "./stack.ts";
import { UNREACHED_REQUEST_RATES } from "./unreached-limits.ts";

/** A local anvil chain with Circle's USDC, escrow holds of an hour and no confirmations to wait for. */
export const localChain = (overrides: Partial<ChainConfig> = {}): ChainConfig => ({
  id: 31337,
  name: "Local chain (anvil)",
  livemode: false,
  local: { port: 0 },
  escrow: {},
  tokens: [{ symbol: "USDC", decimals: 6, deploy: "FiatTokenV2_2" }],
  subscriptions_available: true,
  payments_available: true,
  escrow_available: true,
  hold_seconds: 3600,
  confirmations: 0,
  ...overrides,
});

export interface ScratchDir {
  readonly dataDir: string;
  readonly chainsConfig: string;
  /** Deletes the directory and, as root, the Postgres data kept outside it. */
  readonly remove: () => void;
}

const SCRATCH_PREFIX = "billing-";

/**
 * A fresh data directory (`billing-<name>-…` under the temp dir) holding a chains file, owned by this
 * process (see abandoned.ts).
 */
export const scratchDir = (name: string, chains: readonly ChainConfig[] = [localChain()]): ScratchDir => {
  const dataDir = mkdtempSync(join(tmpdir(), `${SCRATCH_PREFIX}${name}-`));
  claim(dataDir);
  const chainsConfig = join(dataDir, "chains.json");
  writeFileSync(chainsConfig, JSON.stringify({ chains }, null, 2));
  return {
    dataDir,
    chainsConfig,
    remove: () => {
      removePostgresData(join(dataDir, "postgres"));
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
};

/**
 * Scratch directories whose owner was killed before removing them: their stack's indexer and chains and
 * their Postgres are stopped, and the directory goes, with (as root) the cluster kept outside it. A test
 * run interrupted a few times otherwise leaves gigabytes and running processes behind.
 */
export const removeAbandonedScratchDirs = async (): Promise<void> => {
  for (const dataDir of abandoned(SCRATCH_PREFIX)) {
    try {
      await stopLeftovers(join(dataDir, "stack.json"));
      const link = join(dataDir, "postgres");
      const linked = lstatSync(link, { throwIfNoEntry: false })?.isSymbolicLink();
      await stopStalePostmaster(linked ? readlinkSync(link) : link);
      removePostgresData(link);
    } catch {}
    removeQuietly(dataDir);
  }
};

export interface ScratchStack extends ScratchDir {
  readonly stack: RunningStack;
  /** Stops the stack and removes its directory. */
  readonly stop: () => Promise<void>;
}

export type ScratchStackOptions = Partial<Omit<StackOptions, "dataDir" | "chainsConfig">> & {
  readonly chains?: readonly ChainConfig[];
};

/**
 * Starts a non-persistent stack on random ports (JSON logs at Warn, output dropped unless `onOutput`
 * says otherwise).
 */
export const startScratchStack = async (
  name: string,
  { chains, ...options }: ScratchStackOptions = {},
): Promise<ScratchStack> => {
  await removeAbandonedScratchDirs();
  const dir = scratchDir(name, chains);
  try {
    const stack = await startStack({
      dataDir: dir.dataDir,
      chainsConfig: dir.chainsConfig,
      port: 0,
      persistent: false,
      logFormat: "json",
      logLevel: "Warn",
      onOutput: () => {},
      apiLimits: { ...API_LIMIT_DEFAULTS, ...UNREACHED_REQUEST_RATES },
      ...options,
    });
    return {
      ...dir,
      stack,
      stop: async () => {
        await stack.stop();
        dir.remove();
      },
    };
  } catch (error) {
    dir.remove();
    throw error;
  }
};

/** For scripts: a Ctrl-C or SIGTERM stops the stack before the process exits (status 1). */
export const stopOnSignal = (scratch: Pick<ScratchStack, "stop">): void => {
  for (const signal of ["SIGINT", "SIGTERM"] as const)
    process.once(signal, () => {
      void scratch.stop().finally(() => process.exit(1));
    });
};
