/**
 * How many payments a merchant may have open at once on a chain (status `requires_payment` or
 * `processing`: the pay page and the relayer's gasless transfers still serve them), and the one writer
 * of `billing.open_payment_counts`.
 *
 * Counting the open payments at every creation would read up to the limit's number of rows each time.
 * Instead each merchant and chain has a bound, at least its open payments: those open when they were last
 * counted, plus every payment created since. A creation within the bound adds one to it in the statement
 * that locks the row, so creations of one merchant on one chain follow one another and never pass the
 * limit together. Only at the bound are the open payments counted again (the row still locked), and a
 * creation is refused only when they really are at the limit. Nothing else writes the bound: payments
 * that close (paid, expired, canceled) are noticed at the next count, and no worker's transaction takes
 * this row's lock. A refusal is remembered in memory for a second, so a client retrying at the limit
 * costs no count.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import type { ResolvedChain } from "../chains/config.ts";
import { API_LIMIT_DEFAULTS } from "../config/env.ts";
import { fixed } from "../db/query.ts";
import { decodeRows } from "../db/rows.ts";
import { type InvalidRequest, invalidParam } from "../errors.ts";
import type { MerchantScope } from "../merchants/scope.ts";

/** The limit (OPEN_PAYMENTS_PER_CHAIN); 0: none. */
export const OpenPaymentLimit = Context.Reference<{ readonly perMerchantAndChain: number }>(
  "OpenPaymentLimit",
  { defaultValue: () => ({ perMerchantAndChain: API_LIMIT_DEFAULTS.openPaymentsPerChain }) },
);

const REFUSAL_MEMORY_MS = 1000;

/** Open, as the partial index payments_open_by_merchant (migration 0042) says it, so the planner uses it. */
const OPEN = fixed("p.status IN ('requires_payment', 'processing')");

const decodeBound = decodeRows(Schema.Struct({ bound: Schema.Number }));
const decodeOpen = decodeRows(Schema.Struct({ open: Schema.Number }));
const decodeCounts = decodeRows(Schema.Struct({ chain_id: Schema.Number, open: Schema.Number }));

export class OpenPayments extends Context.Service<
  OpenPayments,
  {
    /** Open payments allowed per merchant and chain; 0: no limit. */
    readonly limit: number;
    /**
     * Room for one more open payment of the merchant on the chain, or 400 `open_payments_limit_reached`.
     * Runs in the transaction that inserts the payment (it keeps the merchant's count locked until then).
     */
    readonly admit: (
      scope: MerchantScope,
      chain: ResolvedChain,
    ) => Effect.Effect<void, InvalidRequest | SqlError.SqlError>;
    /** The merchant's open payments on each chain, counted now (up to the limit). */
    readonly count: (
      scope: MerchantScope,
      chainIds: ReadonlyArray<number>,
    ) => Effect.Effect<ReadonlyMap<number, number>, SqlError.SqlError>;
  }
>()("OpenPayments") {
  static readonly layer = Layer.effect(
    OpenPayments,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const clock = yield* Clock.Clock;
      const limit = (yield* OpenPaymentLimit).perMerchantAndChain;
      const refusedUntil = new Map<string, number>();

      const refusal = (chain: ResolvedChain) =>
        invalidParam(
          "chain",
          `You have ${limit.toLocaleString("en-US")} open payments on chain ${chain.id} (${chain.name}), the most allowed at once: cancel those you no longer need (POST /v1/payments/{id}/cancel) or wait until some are paid or expire. GET /v1/limits shows the count.`,
          "open_payments_limit_reached",
        );

      const admit = (scope: MerchantScope, chain: ResolvedChain) =>
        Effect.gen(function* () {
          if (limit === 0) return;
          const memo = `${scope.merchantId}:${chain.id}`;
          const now = clock.currentTimeMillisUnsafe();
          if ((refusedUntil.get(memo) ?? 0) > now) return yield* refusal(chain);
          const bumped = yield* sql`
            INSERT INTO billing.open_payment_counts AS o (merchant_id, chain_id, bound)
            VALUES (${scope.merchantId}, ${chain.id}, 1)
            ON CONFLICT (merchant_id, chain_id) DO UPDATE SET bound = o.bound + 1 WHERE o.bound < ${limit}
            RETURNING o.bound`.pipe(Effect.flatMap(decodeBound));
          if (bumped.length > 0) return;
          // At the bound. ON CONFLICT locked the row although it did not update it, so this statement
          // (a new snapshot) sees every creation that held the lock before: the count is exact.
          const [counted] = yield* sql`
            WITH n AS (
              SELECT count(*)::int AS open FROM (
                SELECT 1 FROM billing.payments p
                WHERE p.merchant_id = ${scope.merchantId} AND p.chain_id = ${chain.id} AND ${OPEN}
                LIMIT ${limit}) AS o)
            UPDATE billing.open_payment_counts c
            SET bound = n.open + CASE WHEN n.open < ${limit} THEN 1 ELSE 0 END
            FROM n WHERE c.merchant_id = ${scope.merchantId} AND c.chain_id = ${chain.id}
            RETURNING n.open`.pipe(Effect.flatMap(decodeOpen));
          if (counted !== undefined && counted.open < limit) return;
          if (refusedUntil.size > 10_000) refusedUntil.clear();
          refusedUntil.set(memo, now + REFUSAL_MEMORY_MS);
          return yield* refusal(chain);
        });

      const count = (scope: MerchantScope, chainIds: ReadonlyArray<number>) =>
        chainIds.length === 0
          ? Effect.succeed(new Map<number, number>())
          : sql`
              SELECT c.id::int AS chain_id, (
                SELECT count(*)::int FROM (
                  SELECT 1 FROM billing.payments p
                  WHERE p.merchant_id = ${scope.merchantId} AND p.chain_id = c.id AND ${OPEN}
                  LIMIT ${limit === 0 ? null : limit}) AS o) AS open
              FROM unnest(${chainIds}::bigint[]) AS c (id)`.pipe(
              Effect.flatMap(decodeCounts),
              Effect.map((rows) => new Map(rows.map((row) => [row.chain_id, row.open]))),
            );

      return { limit, admit, count };
    }),
  );
}
