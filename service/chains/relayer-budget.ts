/**
 * The relayer's hourly spending budget per chain (`relayer_budget_wei_per_hour`, default one coin): a
 * new transaction whose most possible cost (gas limit × max fee) would take the last hour's spending
 * (relayer-spending.ts) past the budget is refused, and a stuck transaction is replaced only while its
 * raised fees fit too. Submissions in flight at the same moment do not see each other's cost, so the
 * budget can be passed by at most their number times one transaction's cost.
 */
import { Clock, Effect } from "effect";
import { Unavailable } from "../errors.ts";
import { recordMetric } from "../metrics/metrics.ts";
import { DEFAULT_RELAYER_BUDGET_WEI_PER_HOUR, type ResolvedChain } from "./config.ts";
import { RelayerError } from "./relayer-account.ts";
import type { RelayerStore } from "./relayer-store.ts";

type Store = RelayerStore["Service"];

/** What an API request answers when the relayer refused for the budget: 503, retry later. */
export const relayerBudgetExhausted = new Unavailable({
  code: "relayer_budget_exhausted",
  message:
    "This service's gas budget for the chain is spent for now, so nothing was sent or recorded. Retry later.",
});

/** The relayer's hourly spending limit on a chain, in wei. */
export const relayerBudget = (chain: ResolvedChain): bigint =>
  chain.relayer_budget_wei_per_hour === undefined
    ? DEFAULT_RELAYER_BUDGET_WEI_PER_HOUR
    : BigInt(chain.relayer_budget_wei_per_hour);

/** Whether a transaction costing at most `cost` wei fits the hourly budget after `spent`. */
export const withinBudget = (spent: bigint, cost: bigint, budget: bigint): boolean => spent + cost <= budget;

const HOUR_MS = 3_600_000;

/** The start of the budget's window now: an hour ago. */
export const budgetWindowStart = Effect.map(Clock.currentTimeMillis, (now) => new Date(now - HOUR_MS));

/** What the account spent on the chain in the budget's window. */
export const spentThisHour = (store: Store, chain: ResolvedChain, from: string) =>
  Effect.flatMap(budgetWindowStart, (since) => store.spentSince(chain.id, from, since));

/**
 * Fails with `budget_exhausted` (logged, and counted in `billing_relayer_budget_refusals_total`) when a
 * new transaction costing at most `cost` would take the chain's spending past its budget.
 */
export const requireBudget = (
  store: Store,
  chain: ResolvedChain,
  from: string,
  cost: bigint,
  purpose: string,
) =>
  Effect.gen(function* () {
    const spent = yield* spentThisHour(store, chain, from);
    const budget = relayerBudget(chain);
    if (withinBudget(spent, cost, budget)) return;
    yield* recordMetric((m) => m.relayerBudgetRefusals.inc({ chain_id: String(chain.id) }));
    yield* Effect.logWarning("relayer budget exhausted; transaction refused").pipe(
      Effect.annotateLogs({
        chain: chain.id,
        purpose,
        spent_wei: spent.toString(),
        cost_wei: cost.toString(),
        budget_wei_per_hour: budget.toString(),
      }),
    );
    return yield* new RelayerError({
      reason: "budget_exhausted",
      message: `the relayer's hourly gas budget on chain ${chain.id} is spent`,
    });
  });
