/** An EventStore on Postgres: the primary key is the uniqueness guarantee, so concurrent duplicates record once. */
import { PgClient } from "@effect/sql-pg";
import { Effect, ManagedRuntime, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import type { EventStore } from "./app.ts";

export const createPostgresEventStore = async (
  databaseUrl: string,
  table = "webhook_receipts",
): Promise<EventStore & { close(): Promise<void> }> => {
  if (!/^[a-z_][a-z0-9_]*$/.test(table)) throw new Error(`invalid table name: ${table}`);
  const runtime = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 4 }));
  await runtime.runPromise(
    Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
      sql.unsafe(
        `CREATE TABLE IF NOT EXISTS ${table} (event_id text PRIMARY KEY, received_at timestamptz NOT NULL DEFAULT now())`,
      ),
    ),
  );
  return {
    recordOnce: (eventId) =>
      runtime.runPromise(
        Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
          sql.unsafe(
            `INSERT INTO ${table} (event_id) VALUES ($1) ON CONFLICT DO NOTHING RETURNING event_id`,
            [eventId],
          ),
        ).pipe(Effect.map((rows) => rows.length === 1)),
      ),
    close: () => runtime.dispose(),
  };
};
