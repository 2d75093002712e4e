/**
 * The hourly budget's running totals (`billing.relayer_spending`): each transaction's cost (gas limit ×
 * max fee until mined, then what the receipt says it paid, L1 data fee included; nothing once
 * superseded) added to its account's total of the minute it was last signed, by the same statement
 * that writes the transaction (relayer-store.ts splices the fragments below into its statements), so
 * the totals always equal the sum over the transactions. A replacement signs again: its whole cost moves
 * to the replacement's minute, so the raised fees count within the budget for the hour after it. A total
 * per backend (`pg_backend_pid()`): no two concurrent transactions update the same row, so none waits on
 * another's row lock. The same statements keep each merchant's part of those costs per minute
 * (`billing.relayer_merchant_spending`, the transaction's `merchant_ids`/`merchant_objects`), which the
 * merchants' shares of the budget read (relayer-shares.ts).
 */
import { Effect, Schema } from "effect";
import type { SqlClient } from "effect/sql";
import { fixed } from "../db/query.ts";
import { decodeRows } from "../db/rows.ts";

/** What a transaction row counts against the budget now. */
export const COST = fixed(
  "coalesce(spent_wei, CASE WHEN status = 'superseded' THEN 0 ELSE gas_limit * max_fee_per_gas END)",
);
/** The time from which a transaction's cost counts (older rows have no signed_at). */
export const SIGNED_AT = (alias: string) => fixed(`coalesce(${alias}.signed_at, ${alias}.created_at)`);
/** The minute a time falls in, whatever the session's time zone. */
export const minuteOf = (column: string) =>
  fixed(`date_bin('1 minute', ${column}, timestamptz '2000-01-01 00:00:00+00')`);
/** The same minute computed here (the origin above is a whole minute since the epoch). */
export const startOfMinute = (at: Date): Date => new Date(Math.floor(at.getTime() / 60_000) * 60_000);
export const ADD_TO_TOTAL = fixed(`ON CONFLICT (chain_id, from_address, minute, backend)
  DO UPDATE SET wei = billing.relayer_spending.wei + excluded.wei`);

/**
 * The merchants a transaction row (`alias`) serves, one row each (`m.merchant_id`), with `m.part`: its
 * part of `wei`, floor(wei × its objects / all objects), as relayer-shares.ts's `partOf` computes it.
 * For `FROM … CROSS JOIN LATERAL`; a row serving no merchant yields none.
 */
export const MERCHANT_PARTS = (alias: string, wei: string) =>
  fixed(`(SELECT u.merchant_id, div(${wei} * u.objects, tot.n) AS part
    FROM unnest(${alias}.merchant_ids, ${alias}.merchant_objects) AS u(merchant_id, objects),
      (SELECT sum(k) AS n FROM unnest(${alias}.merchant_objects) AS o(k)) AS tot) AS m`);
/** The merchants' totals (`billing.relayer_merchant_spending`), kept beside the account's as above. */
export const MERCHANT_TOTALS = fixed(
  "billing.relayer_merchant_spending (chain_id, from_address, merchant_id, minute, backend, wei)",
);
export const ADD_TO_MERCHANT_TOTAL = fixed(`ON CONFLICT (chain_id, from_address, merchant_id, minute, backend)
  DO UPDATE SET wei = billing.relayer_merchant_spending.wei + excluded.wei`);

const decodeText = decodeRows(Schema.Struct({ value: Schema.NullOr(Schema.String) }));
const decodeMinutes = decodeRows(
  Schema.Struct({ merchant_id: Schema.String, minute: Schema.Date, wei: Schema.BigIntFromString }),
);

export const relayerSpending = (sql: SqlClient.SqlClient) => ({
  /**
   * Wei spent (or, while pending, at most to be spent) by the account on a chain by transactions last
   * signed since the start of the minute `since` falls in: up to a minute more than since `since`.
   */
  spentSince: (chainId: number, from: string, since: Date) =>
    sql`SELECT coalesce(sum(wei), 0)::text AS value FROM billing.relayer_spending
      WHERE chain_id = ${chainId} AND from_address = ${from}
        AND minute >= ${startOfMinute(since)}`.pipe(
      Effect.flatMap(decodeText),
      Effect.map((rows) => BigInt(rows[0]?.value ?? "0")),
    ),
  /**
   * The merchants' parts of what the account spent on a chain, per merchant and minute, for minutes from
   * the one `since` falls in (as `spentSince`).
   */
  merchantSpentSince: (chainId: number, from: string, merchantIds: ReadonlyArray<string>, since: Date) =>
    merchantIds.length === 0
      ? Effect.succeed([])
      : sql`SELECT merchant_id, minute, sum(wei)::text AS wei FROM billing.relayer_merchant_spending
          WHERE chain_id = ${chainId} AND from_address = ${from} AND merchant_id = ANY (${[...merchantIds]}::text[])
            AND minute >= ${startOfMinute(since)}
          GROUP BY 1, 2 ORDER BY 1, 2`.pipe(Effect.flatMap(decodeMinutes)),
  /** Drops the totals of minutes before `before` (nothing reads them any more). */
  pruneSpending: (before: Date) =>
    Effect.andThen(
      sql`DELETE FROM billing.relayer_spending WHERE minute < ${startOfMinute(before)}`,
      sql`DELETE FROM billing.relayer_merchant_spending WHERE minute < ${startOfMinute(before)}`,
    ).pipe(Effect.asVoid),
  forgetSpending: (chainId: number) =>
    Effect.andThen(
      sql`DELETE FROM billing.relayer_spending WHERE chain_id = ${chainId}`,
      sql`DELETE FROM billing.relayer_merchant_spending WHERE chain_id = ${chainId}`,
    ).pipe(Effect.asVoid),
});
