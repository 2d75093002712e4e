/**
 * The benchmarks' chain: one local anvil chain with test USDC, confirmations 0 and no escrow hold, so a
 * figure measures the pipeline rather than waiting.
 */
import { localChain } from "../scripts/stack/scratch-stack.ts";

export const benchChain = (bench: string) =>
  localChain({
    name: `Local (${bench} bench)`,
    escrow_available: false,
    hold_seconds: 0,
    // 10,000 authorizations and their charges in minutes: far above the default hourly relayer budget.
    relayer_budget_wei_per_hour: (10n ** 21n).toString(),
  });
