/**
 * A lock a test holds on a connection of its own until it lets go, and who waits for it, read from
 * Postgres (`pg_blocking_pids`): so a test arranges "these wait here" by observing them waiting, never
 * by a pause it hopes is long enough.
 */
import { PgClient } from "@effect/sql-pg";
import { Effect, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import { stack } from "./helpers.ts";

export interface HeldLock {
  /** The holding connection's backend pid. */
  readonly pid: number;
  /** The backends waiting for a lock this connection holds. */
  readonly waiting: () => Promise<readonly number[]>;
  /** Commits the holding transaction (its transaction-level locks go) and closes the connection. */
  readonly release: () => Promise<void>;
}

/**
 * Runs `statement` (which takes transaction-level locks) in a transaction on a connection of its own
 * and keeps the transaction open until `release`.
 */
export const holdLock = async (
  statement: string,
  params: readonly unknown[] = [],
  databaseUrl: string = stack().databaseUrl,
): Promise<HeldLock> => {
  const held = Promise.withResolvers<number>();
  const letGo = Promise.withResolvers<void>();
  const layer = PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 });
  const holder = Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* sql.unsafe(statement, [...params]);
          const [row] = yield* sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`;
          held.resolve(row?.pid ?? -1);
          yield* Effect.promise(() => letGo.promise);
        }),
      );
    }).pipe(Effect.provide(layer)),
  );
  holder.catch((error: unknown) => held.reject(error));
  const pid = await held.promise;
  const waiting = async () =>
    (
      await Effect.runPromise(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient;
          return yield* sql<{ pid: number }>`SELECT pid FROM pg_stat_activity
            WHERE ${pid}::int = ANY (pg_blocking_pids(pid)) ORDER BY pid`;
        }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 }))),
      )
    ).map((row) => row.pid);
  return {
    pid,
    waiting,
    release: async () => {
      letGo.resolve();
      await holder;
    },
  };
};
