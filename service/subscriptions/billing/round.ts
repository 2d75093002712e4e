/**
 * What one chain's billing round shares: the chain, its time, a price cache, and how a step runs its
 * rows: in batches of CHUNK, PARALLEL at a time, each in one transaction under row locks taken in id
 * order with SKIP LOCKED. A batch that fails is retried one item per transaction, so one bad row or a
 * chain outage never holds back the rest.
 */
import { Array as Arr, Effect } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import type { ResolvedChain } from "../../chains/config.ts";
import { TokenStates } from "../../chains/token-states.ts";
import { type PriceRow, Prices } from "../prices.ts";

/** Items per transaction (and charges per chargeMany), and transactions at once. */
export const CHUNK = 200;
export const PARALLEL = 4;
/** Rows one step takes per round. */
export const BATCH = CHUNK * PARALLEL;
/**
 * Due subscriptions a round's boundary step takes, and settled invoices its settling step takes: several
 * batches, so that PARALLEL transactions stay busy through a boundary instead of waiting, every BATCH,
 * for the slowest of them and the round's other steps, and so that settling keeps pace with billing.
 */
export const DUE_PER_ROUND = BATCH * 5;

export interface BillingRound {
  readonly chain: ResolvedChain;
  /** Chain time of the round (the test clock moves it). */
  readonly now: number;
  /**
   * The chain's tokens whose issuer has paused them (lowercase addresses): nothing is charged in them,
   * and their invoices neither lapse nor are retried, until they are unpaused.
   */
  readonly pausedTokens: ReadonlyArray<string>;
  readonly price: (id: string) => Effect.Effect<PriceRow, SqlError.SqlError>;
}

export const makeRound = (chain: ResolvedChain, now: number) =>
  Effect.gen(function* () {
    const prices = yield* Prices;
    const pausedTokens = yield* (yield* TokenStates).pausedTokens(chain.id);
    const cache = new Map<string, PriceRow>();
    const round: BillingRound = {
      chain,
      now,
      pausedTokens,
      price: (id) => {
        const known = cache.get(id);
        return known
          ? Effect.succeed(known)
          : Effect.tap(prices.byId(id), (row) => Effect.sync(() => cache.set(id, row)));
      },
    };
    return round;
  });

/** Runs `batch` over `ids` in transactions of CHUNK, PARALLEL at once; a failed batch item by item. */
export const inTransactions = <E, R>(
  ids: ReadonlyArray<string>,
  batch: (ids: ReadonlyArray<string>) => Effect.Effect<void, E, R>,
) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const one = (group: ReadonlyArray<string>) => sql.withTransaction(batch(group));
    const itemByItem = (group: ReadonlyArray<string>) =>
      Effect.forEach(
        group,
        (id) =>
          one([id]).pipe(
            Effect.catchCause((cause) =>
              Effect.logWarning("billing step failed; retried on the next pass", cause).pipe(
                Effect.annotateLogs({ id }),
              ),
            ),
          ),
        { discard: true },
      );
    yield* Effect.forEach(
      Arr.chunksOf(ids, CHUNK),
      (group) => one(group).pipe(Effect.catchCause(() => itemByItem(group))),
      { concurrency: PARALLEL, discard: true },
    );
  });

/** `inTransactions` with one step per item. */
export const eachInTransaction = <A, E, R>(
  ids: ReadonlyArray<string>,
  step: (id: string) => Effect.Effect<A, E, R>,
) => inTransactions(ids, (group) => Effect.forEach(group, step, { discard: true }));
