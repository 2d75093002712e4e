/**
 * The hourly budget's running totals (`billing.relayer_spending`): each transaction's cost (gas limit ×
 * max fee until mined, then what the receipt says it paid, L1 data fee included; nothing once
 * superseded) added to its account's total of the minute it was last signed, by the same statement
 * that writes the transaction (relayer-store.ts splices the fragments below into its statements), so
 * the totals always equal the sum over the transactions. A replacement signs again: its whole cost moves
 * to the replacement's minute, so the raised fees count within the budget for the hour after it. A total
 * per backend (`pg_backend_pid()`): no two concurrent transactions update the same row, so none waits on
 * another's row lock.
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

const decodeText = decodeRows(Schema.Struct({ value: Schema.NullOr(Schema.String) }));

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
  /** Drops the totals of minutes before `before` (nothing reads them any more). */
  pruneSpending: (before: Date) =>
    Effect.asVoid(sql`DELETE FROM billing.relayer_spending WHERE minute < ${startOfMinute(before)}`),
  forgetSpending: (chainId: number) =>
    Effect.asVoid(sql`DELETE FROM billing.relayer_spending WHERE chain_id = ${chainId}`),
});
