/**
 * Starts the real stack once per test run, exactly as `npm start` does, on random free ports and a
 * fresh database: embedded Postgres, two local anvil chains (one with subscriptions closed), a third
 * anvil configured as a *live, non-local* chain by RPC URL (the operator's path), Ponder and the service.
 * The relayer's key is generated for the run: the service refuses anvil's public keys on a chain that is
 * not local (resolveLocalChain funds it on the anvils, playing the operator).
 */
import { createWriteStream, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import type { TestProject } from "vitest/node";
import { startAnvil } from "../../scripts/stack/anvil.ts";
import { resolveLocalChain } from "../../scripts/stack/local-chain.ts";
import { removeAbandonedScratchDirs, scratchDir } from "../../scripts/stack/scratch-stack.ts";
import { startStack } from "../../scripts/stack/stack.ts";
import { UNREACHED_REQUEST_RATES } from "../../scripts/stack/unreached-limits.ts";
import { freePort } from "../../scripts/stack/wait.ts";
import type { ChainConfig } from "../../service/chains/config.ts";
import { API_LIMIT_DEFAULTS } from "../../service/config/env.ts";
import { DEV_API_KEY } from "./constants.ts";

export interface TestStack {
  readonly apiUrl: string;
  readonly ponderUrl: string;
  readonly databaseUrl: string;
  readonly chainsFile: string;
  readonly dataDir: string;
  readonly merchantId: string;
  readonly apiKey: string;
  readonly webhookSecretsKey: string;
  /** The relayer's key, generated for the run: second service processes sign with it too. */
  readonly relayerKey: `0x${string}`;
}

declare module "vitest" {
  export interface ProvidedContext {
    stack: TestStack;
  }
}

const TEST_CHAIN = {
  id: 31337,
  name: "Local test chain",
  livemode: false,
  local: { port: 0 },
  escrow: {},
  tokens: [{ symbol: "USDC", decimals: 6, deploy: "FiatTokenV2_2" as const }],
  subscriptions_available: true,
  payments_available: true,
  escrow_available: true,
  hold_seconds: 3600,
  confirmations: 0,
} satisfies ChainConfig;

export default async function setup(project: TestProject) {
  await removeAbandonedScratchDirs();
  const scratch = scratchDir("e2e", []);
  const { dataDir, chainsConfig } = scratch;
  const relayerKey = generatePrivateKey();
  const relayer = privateKeyToAccount(relayerKey).address;
  // The operator terms name is not the relayer, as in production: a key of its own that names the
  // relayer on each escrow (the stack does it, as its owner would with npm run relayer).
  const testChain = { ...TEST_CHAIN, operator: privateKeyToAccount(generatePrivateKey()).address };
  const liveAnvil = await startAnvil({ port: await freePort(), chainId: 31338, blockTime: 1 });
  const live = await resolveLocalChain(
    { ...testChain, id: 31338, name: "Live chain by RPC", livemode: false },
    liveAnvil,
    join(dataDir, "live-deployments.json"),
    relayer,
  );
  const liveChain: ChainConfig = {
    id: 31338,
    name: "Live chain by RPC",
    livemode: true,
    rpc: { http: [liveAnvil.http], ws: liveAnvil.ws },
    operator: testChain.operator,
    native_currency: { name: "Ether", symbol: "ETH", decimals: 18 },
    escrow: live.escrow,
    tokens: live.tokens.map(({ symbol, decimals, address }) => ({
      symbol,
      decimals,
      ...(address ? { address } : {}),
    })),
    subscriptions_available: false,
    payments_available: false,
    escrow_available: false,
    hold_seconds: 0,
    confirmations: 2,
  };
  const closedTestChain: ChainConfig = {
    ...testChain,
    id: 31339,
    name: "Local chain, subscriptions closed, 2 confirmations",
    subscriptions_available: false,
    payments_available: true,
    confirmations: 2,
  };
  writeFileSync(chainsConfig, JSON.stringify({ chains: [testChain, liveChain, closedTestChain] }, null, 2));

  // The stack's own output (indexer, anvil) goes to a file for when a test needs explaining.
  mkdirSync("test-results", { recursive: true });
  const log = createWriteStream("test-results/stack.log");
  const stack = await startStack({
    dataDir,
    chainsConfig,
    port: 0,
    persistent: false,
    devApiKey: DEV_API_KEY,
    relayerKey,
    logFormat: "json",
    logLevel: "Warn",
    apiLimits: { ...API_LIMIT_DEFAULTS, ...UNREACHED_REQUEST_RATES },
    onOutput: (source, line) => {
      log.write(`[${source}] ${line}\n`);
    },
  }).catch(async (error: unknown) => {
    await liveAnvil.stop();
    throw error;
  });

  project.provide("stack", {
    apiUrl: stack.apiUrl,
    ponderUrl: stack.ponderUrl,
    databaseUrl: stack.databaseUrl,
    chainsFile: stack.chainsFile,
    dataDir,
    merchantId: stack.devMerchant.merchantId,
    apiKey: stack.devMerchant.apiKey,
    webhookSecretsKey: stack.webhookSecretsKey,
    relayerKey: stack.relayerKey,
  });

  return async () => {
    await stack.stop();
    await liveAnvil.stop();
    log.end();
    scratch.remove();
  };
}
