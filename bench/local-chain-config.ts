/**
 * The benchmarks' chain: one local anvil chain with test USDC, confirmations 0 and no escrow hold, so a
 * figure measures the pipeline rather than waiting. Writes the chains file into a fresh data directory.
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChainConfig } from "../service/chains/config.ts";

export const benchChainsConfig = (bench: string) => {
  const dataDir = mkdtempSync(join(tmpdir(), `billing-${bench}-`));
  const chainsConfig = join(dataDir, "chains.json");
  const chain: ChainConfig = {
    id: 31337,
    name: `Local (${bench} bench)`,
    livemode: false,
    local: { port: 0 },
    escrow: {},
    tokens: [{ symbol: "USDC", decimals: 6, deploy: "TestUSDC" }],
    subscriptions_available: true,
    escrow_available: false,
    hold_seconds: 0,
    confirmations: 0,
    // 10,000 authorizations and their charges in minutes: far above the default hourly relayer budget.
    relayer_budget_wei_per_hour: (10n ** 21n).toString(),
  };
  writeFileSync(chainsConfig, JSON.stringify({ chains: [chain] }));
  return { dataDir, chainsConfig };
};
