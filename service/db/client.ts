import { PgClient } from "@effect/sql-pg";
import { Context, Effect, Redacted } from "effect";
import { SqlClient } from "effect/sql";

/** The service's own tables live in this Postgres schema. */
export const BILLING_SCHEMA = "billing";

/**
 * Ponder writes chain truth into a schema named per build and publishes it as views in this
 * stable schema; the service reads chain tables only from here.
 */
export const ONCHAIN_SCHEMA = "onchain";

/** Postgres: the one store. numeric/int8 columns come back as strings and are decoded by each repository. */
export const databaseLayer = (url: string, maxConnections = 20) =>
  PgClient.layer({
    url: Redacted.make(url),
    maxConnections,
    applicationName: "mandate-billing",
    connectTimeout: "5 seconds",
  });

/**
 * Runs `effect` on its own connection, outside the caller's transaction: for work whose result must be
 * committed and visible to others before the caller's transaction ends (e.g. waiting for a broadcast).
 */
export const outsideTransaction = <A, E, R>(
  effect: Effect.Effect<A, E, R>,
): Effect.Effect<A, E, R | SqlClient.SqlClient> =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
    Effect.updateContext(
      effect,
      (context: Context.Context<R>) => Context.omit(sql.transactionService)(context) as Context.Context<R>,
    ),
  );
