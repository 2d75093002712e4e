/**
 * pg_stat_statements for a benchmark: `loadPgStatements()` before the bench starts its Postgres adds the
 * library to the server's flags (scripts/stack/postgres.ts reads POSTGRES_FLAGS); the bench then creates
 * the extension and reads the statements that cost most.
 */
export const PG_STATEMENTS_FLAGS = "-c shared_preload_libraries=pg_stat_statements";

export const loadPgStatements = (): void => {
  const current = process.env.POSTGRES_FLAGS ?? "";
  if (!current.includes("pg_stat_statements"))
    process.env.POSTGRES_FLAGS = `${current} ${PG_STATEMENTS_FLAGS}`.trim();
};
