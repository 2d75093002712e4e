/**
 * Upgrading to migration 0029 when the operator built its index ahead (docs/operations.md, Upgrading): a valid index
 * is kept as it is; an invalid one, left by a concurrent build that failed, is dropped and built again.
 */
import { PgClient } from "@effect/sql-pg";
import { Effect, Redacted, Schema } from "effect";
import { Migrator, SqlClient } from "effect/sql";
import { describe, expect, it } from "vitest";
import { migrations, runMigrations } from "../../service/db/migrations.ts";
import { decodeRows } from "../../service/db/rows.ts";
import { freshDatabase } from "./harness.ts";

const before0029 = Object.fromEntries(Object.entries(migrations).filter(([name]) => name < "0029"));

const decodeIndex = decodeRows(
  Schema.Struct({ valid: Schema.Boolean, unique: Schema.Boolean, definition: Schema.String }),
);

const theIndex = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql`SELECT i.indisvalid AS valid, i.indisunique AS unique, pg_get_indexdef(i.indexrelid) AS definition
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'billing' AND c.relname = 'webhook_deliveries_event'`.pipe(Effect.flatMap(decodeIndex)),
);

/** A database migrated up to 0028, `prepare` run on it, then every migration. */
const upgrade = async (
  prepare: (sql: SqlClient.SqlClient) => Effect.Effect<unknown, unknown, SqlClient.SqlClient>,
) => {
  const url = await freshDatabase("upgrade_0029");
  return Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      yield* sql`CREATE SCHEMA billing`;
      yield* Migrator.make({})({
        loader: Migrator.fromRecord(before0029),
        table: "billing.schema_migrations",
      });
      yield* prepare(sql);
      yield* runMigrations;
      return yield* theIndex;
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 }))),
  );
};

const INDEX_DEFINITION =
  "CREATE INDEX webhook_deliveries_event ON billing.webhook_deliveries USING btree (event_id)";

describe("migration 0029 on a database whose operator built its index ahead", () => {
  it("keeps an index built concurrently", async () => {
    const index = await upgrade((sql) =>
      sql.unsafe(
        "CREATE INDEX CONCURRENTLY webhook_deliveries_event ON billing.webhook_deliveries (event_id)",
      ),
    );
    expect(index).toEqual([{ valid: true, unique: false, definition: INDEX_DEFINITION }]);
  });

  it("drops an invalid one that a failed concurrent build left, and builds it again", async () => {
    const index = await upgrade((sql) =>
      Effect.gen(function* () {
        // Two deliveries of one event make a concurrent unique build fail, leaving the index invalid.
        yield* sql.unsafe(`INSERT INTO billing.webhook_deliveries
            (id, endpoint_id, event_id, event_type, trigger, status, created_at)
          VALUES ('whd_1', 'we_1', 'evt_1', 'charge.succeeded', 'event', 'pending', now()),
                 ('whd_2', 'we_2', 'evt_1', 'charge.succeeded', 'event', 'pending', now())`);
        const failed = yield* Effect.result(
          sql.unsafe(
            "CREATE UNIQUE INDEX CONCURRENTLY webhook_deliveries_event ON billing.webhook_deliveries (event_id)",
          ),
        );
        expect(failed._tag).toBe("Failure");
        expect(yield* theIndex).toMatchObject([{ valid: false, unique: true }]);
      }),
    );
    expect(index).toEqual([{ valid: true, unique: false, definition: INDEX_DEFINITION }]);
  });
});
