/**
 * Each merchant's share of a chain's hourly relayer budget (`relayer_merchant_share`, default one half):
 * the transactions serving one merchant may count at most that part of `relayer_budget_wei_per_hour` in
 * any hour, so no single merchant (its payments' sweeps, its charges, its customers' gasless transfers)
 * can spend the budget the others' charges, sweeps and releases need.
 *
 * A submission names the merchant of each object it carries (a batch's charges, a sweep's payments, an
 * authorisation's mandate); the transaction is recorded with each merchant and how many of its objects
 * it carries, and each merchant's part of the transaction's cost is that fraction of it, rounded down
 * (`partOf`): a batch serving several merchants counts against each only what its objects take, and the
 * parts never exceed the cost. The parts are kept per merchant and minute beside the account's totals,
 * by the same statements (relayer-spending.ts), through the cost's life (reserved, paid, superseded).
 *
 * A new transaction is refused when any merchant's part would take that merchant's spending in the
 * hour past its share (`merchant_share_exhausted`, naming those merchants, logged and counted in
 * `billing_relayer_share_refusals_total`); nothing is recorded or sent. Batch senders leave the named
 * merchants' items for later and send the rest (batch-isolation.ts), so one merchant's spending never
 * holds back another's. Transactions serving no merchant count against the chain's budget only.
 */
import { Clock, Effect } from "effect";
import { recordMetric } from "../metrics/metrics.ts";
import { DEFAULT_RELAYER_MERCHANT_SHARE, type ResolvedChain } from "./config.ts";
import { RelayerError } from "./relayer-account.ts";
import { budgetWindowStart, relayerBudget } from "./relayer-budget.ts";
import type { RelayerStore } from "./relayer-store.ts";

type Store = RelayerStore["Service"];

/** A merchant a transaction serves, and how many of the objects it carries are that merchant's. */
export interface MerchantWeight {
  readonly merchantId: string;
  readonly objects: number;
}

/** The merchants of the objects a transaction carries (one entry per object), counted, in first-seen order. */
export const merchantWeights = (merchants: ReadonlyArray<string>): ReadonlyArray<MerchantWeight> => {
  const counts = new Map<string, number>();
  for (const merchant of merchants) counts.set(merchant, (counts.get(merchant) ?? 0) + 1);
  return Array.from(counts, ([merchantId, objects]) => ({ merchantId, objects }));
};

/** A merchant's part of a cost: floor(cost × objects / all objects). The parts of a cost sum to at most it. */
export const partOf = (cost: bigint, objects: number, allObjects: number): bigint =>
  allObjects <= 0 ? 0n : (cost * BigInt(objects)) / BigInt(allObjects);

/** Millionths: the share's precision. */
const SHARE_SCALE = 1_000_000;

/** The most one merchant's parts may add up to in an hour: floor(budget × share). */
export const shareLimit = (budget: bigint, share: number): bigint =>
  (budget * BigInt(Math.round(share * SHARE_SCALE))) / BigInt(SHARE_SCALE);

/** The chain's limit per merchant and hour, in wei. */
export const merchantShareLimit = (chain: ResolvedChain): bigint =>
  shareLimit(relayerBudget(chain), chain.relayer_merchant_share ?? DEFAULT_RELAYER_MERCHANT_SHARE);

const HOUR_AND_MINUTE_MS = 61 * 60_000;

/**
 * Seconds until a part fits a merchant's share: its spending per minute (the minutes in the window)
 * leaves the window minute by minute, oldest first, and a minute stops counting once the window's start
 * has passed its end (an hour and a minute after it began: the window is counted in whole minutes). A
 * part larger than the whole share never fits: the whole window then.
 */
export const shareRetryAfterSeconds = (
  minutes: ReadonlyArray<{ readonly minute: Date; readonly wei: bigint }>,
  part: bigint,
  limit: bigint,
  nowMs: number,
): number => {
  const secondsUntil = (ms: number) => Math.max(1, Math.ceil((ms - nowMs) / 1000));
  if (part > limit) return secondsUntil(nowMs + HOUR_AND_MINUTE_MS);
  const ordered = [...minutes].sort((a, b) => a.minute.getTime() - b.minute.getTime());
  let spent = ordered.reduce((sum, m) => sum + m.wei, 0n);
  if (spent + part <= limit) return 1;
  for (const m of ordered) {
    spent -= m.wei;
    if (spent + part <= limit) return secondsUntil(m.minute.getTime() + HOUR_AND_MINUTE_MS);
  }
  return secondsUntil(nowMs + HOUR_AND_MINUTE_MS);
};

/** The merchants (of `merchants`) whose part of `cost` would pass their share after what they spent. */
export const overShare = (
  merchants: ReadonlyArray<MerchantWeight>,
  spending: ReadonlyArray<{ readonly merchant_id: string; readonly minute: Date; readonly wei: bigint }>,
  cost: bigint,
  limit: bigint,
  nowMs: number,
): ReadonlyArray<{ readonly merchantId: string; readonly retryAfterSeconds: number }> => {
  const allObjects = merchants.reduce((sum, m) => sum + m.objects, 0);
  const over: Array<{ merchantId: string; retryAfterSeconds: number }> = [];
  for (const merchant of merchants) {
    const minutes = spending.filter((row) => row.merchant_id === merchant.merchantId);
    const spent = minutes.reduce((sum, row) => sum + row.wei, 0n);
    const part = partOf(cost, merchant.objects, allObjects);
    if (spent + part > limit)
      over.push({
        merchantId: merchant.merchantId,
        retryAfterSeconds: shareRetryAfterSeconds(minutes, part, limit, nowMs),
      });
  }
  return over;
};

/**
 * Fails with `merchant_share_exhausted` (logged, counted) when a new transaction costing at most `cost`
 * would take any merchant it serves past its share of the chain's hourly budget.
 */
export const requireMerchantShares = (
  store: Store,
  chain: ResolvedChain,
  from: string,
  cost: bigint,
  merchants: ReadonlyArray<MerchantWeight>,
  purpose: string,
) =>
  Effect.gen(function* () {
    if (merchants.length === 0) return;
    const since = yield* budgetWindowStart;
    const spending = yield* store.merchantSpentSince(
      chain.id,
      from,
      merchants.map((m) => m.merchantId),
      since,
    );
    const limit = merchantShareLimit(chain);
    const over = overShare(merchants, spending, cost, limit, yield* Clock.currentTimeMillis);
    if (over.length === 0) return;
    return yield* Effect.flip(shareRefusal(chain, over, cost, purpose));
  });

/** A refusal for the merchants' shares: logged, counted, and the error to answer it with. */
export const shareRefusal = (
  chain: ResolvedChain,
  over: ReadonlyArray<{ readonly merchantId: string; readonly retryAfterSeconds: number }>,
  cost: bigint,
  purpose: string,
) =>
  Effect.gen(function* () {
    const merchants = over.map((o) => o.merchantId);
    yield* recordMetric((m) => m.relayerShareRefusals.inc({ chain_id: String(chain.id) }));
    yield* Effect.logWarning("merchant's share of the relayer budget exhausted; transaction refused").pipe(
      Effect.annotateLogs({
        chain: chain.id,
        purpose,
        merchants: merchants.join(","),
        cost_wei: cost.toString(),
        share_wei_per_hour: merchantShareLimit(chain).toString(),
      }),
    );
    return new RelayerError({
      reason: "merchant_share_exhausted",
      message: `the relayer's hourly gas budget on chain ${chain.id} has no room left in the share of ${merchants.join(", ")}`,
      merchants,
      retryAfterSeconds: Math.max(1, ...over.map((o) => o.retryAfterSeconds)),
    });
  });
