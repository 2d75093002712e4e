import { PgClient } from "@effect/sql-pg";
import { Effect, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import { describe, expect, it } from "vitest";
import { migrations, runMigrations } from "../../service/db/migrations.ts";
import { stack } from "./helpers.ts";

describe("migrations", () => {
  it("are applied once, and running them again — even several at once — changes nothing", async () => {
    const program = Effect.gen(function* () {
      const results = yield* Effect.all([runMigrations, runMigrations, runMigrations], {
        concurrency: "unbounded",
      });
      const sql = yield* SqlClient.SqlClient;
      const applied = yield* sql<{
        name: string;
      }>`SELECT name FROM billing.schema_migrations ORDER BY migration_id`;
      return { results, applied: applied.map((row) => row.name) };
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(stack().databaseUrl), maxConnections: 4 })));
    const { results, applied } = await Effect.runPromise(program);
    expect(results).toEqual([[], [], []]);
    expect(applied).toEqual(Object.keys(migrations).map((k) => k.replace(/^\d+_/, "")));
  });
});
