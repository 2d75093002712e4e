/**
 * An EventStore on Postgres. The table's primary key is the uniqueness guarantee: `INSERT … ON CONFLICT
 * DO NOTHING RETURNING` returns the row only to the one caller that inserted it, so concurrent duplicate
 * deliveries, in one process or many, record (and do the work) once.
 */
import { PgClient } from "@effect/sql-pg";
import { Effect, ManagedRuntime, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import type { EventStore } from "./app.ts";

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

export const createPostgresEventStore = async (
  databaseUrl: string,
  table = "webhook_receipts",
): Promise<EventStore & { close(): Promise<void> }> => {
  if (!IDENTIFIER.test(table)) throw new Error(`invalid table name: ${table} (lowercase letters, digits, _)`);
  const quoted = `"${table}"`;
  // The runtime owns the connection pool until close().
  const runtime = ManagedRuntime.make(
    PgClient.layer({
      url: Redacted.make(databaseUrl),
      maxConnections: 4,
      applicationName: "webhook-receiver-example",
    }),
  );
  const run = <A>(statement: string, params: readonly unknown[] = []) =>
    runtime.runPromise(
      Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) => sql.unsafe<A & object>(statement, params)),
    );
  const create = () =>
    run(
      `CREATE TABLE IF NOT EXISTS ${quoted} (event_id text PRIMARY KEY, received_at timestamptz NOT NULL DEFAULT now())`,
    );
  try {
    // Two processes creating the table at once can collide on the catalog; the second attempt sees it.
    await create().catch(create);
  } catch (error) {
    await runtime.dispose();
    throw error;
  }
  return {
    recordOnce: async (eventId) => {
      const rows = await run<{ event_id: string }>(
        `INSERT INTO ${quoted} (event_id) VALUES ($1) ON CONFLICT (event_id) DO NOTHING RETURNING event_id`,
        [eventId],
      );
      return rows.length === 1;
    },
    close: () => runtime.dispose(),
  };
};
