/**
 * pg_stat_statements for a benchmark: `loadPgStatements()` before the bench starts its Postgres adds the
 * library to the server's flags (scripts/stack/postgres.ts reads POSTGRES_FLAGS); the bench then resets
 * the statistics where its measured part starts (`resetStatements`) and prints the statements that cost
 * most where it ends (`printStatements`).
 */
import { PgClient } from "@effect/sql-pg";
import { Effect } from "effect";

export const PG_STATEMENTS_FLAGS = "-c shared_preload_libraries=pg_stat_statements";

export const loadPgStatements = (): void => {
  const current = process.env.POSTGRES_FLAGS ?? "";
  if (!current.includes("pg_stat_statements"))
    process.env.POSTGRES_FLAGS = `${current} ${PG_STATEMENTS_FLAGS}`.trim();
};

/** Whether this bench's Postgres loads pg_stat_statements (POSTGRES_FLAGS). */
export const pgStatementsLoaded = (): boolean =>
  process.env.POSTGRES_FLAGS?.includes("pg_stat_statements") ?? false;

/** Starts the statements' (and the tables') statistics afresh. */
export const resetStatements = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient;
  yield* sql`CREATE EXTENSION IF NOT EXISTS pg_stat_statements`;
  yield* sql`SELECT pg_stat_statements_reset()`;
  yield* sql`SELECT pg_stat_reset()`;
});

/** Prints every statement's total since the reset, and the 40 costliest, with calls and mean time each. */
export const printStatements = (what: string) =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient;
    const [all] = yield* sql<{ calls: number; ms: number }>`SELECT coalesce(sum(calls), 0)::int AS calls,
        round(coalesce(sum(total_exec_time), 0))::int AS ms FROM pg_stat_statements`;
    const top = yield* sql`SELECT calls::int, round(total_exec_time)::int AS total_ms,
        round(mean_exec_time::numeric, 3)::float8 AS mean_ms, round(rows::numeric / calls, 1)::float8 AS rows,
        left(regexp_replace(query, '[[:space:]]+', ' ', 'g'), 110) AS query
      FROM pg_stat_statements ORDER BY total_exec_time DESC LIMIT 40`;
    console.log(`statements of ${what}: ${all?.calls} calls, ${all?.ms} ms; costliest first:`);
    console.table(top);
  });
