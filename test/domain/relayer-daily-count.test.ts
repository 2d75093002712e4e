/**
 * The per-mandate daily count of authorisations (`RelayerStore.actionsSince`) reads the mandate's own
 * attempts, however many transactions the chain has, also through a plan Postgres cached on the
 * connection while the table was small and had no statistics (a new deployment's first minute, the
 * billing bench's set-up). With the index that migration 0030 drops put back, the plan cached at 500
 * rows read every transaction of the chain on each count. Counted from the backend's statistics of the
 * table across the count: rows read by sequential scans and rows fetched through indexes.
 */

import { Effect, Schema } from "effect";
import { SqlClient } from "effect/sql";
import { afterAll, beforeAll, expect, it } from "vitest";
import { RelayerStore } from "../../service/chains/relayer-store.ts";
import { decodeRows } from "../../service/db/rows.ts";
import { type RelayerStoreRuntime, relayerStoreRuntime } from "./harness.ts";

const CHAIN_ID = 31337;
const SMALL = 500;
const LARGE = 20_000;
const ACTION = `authorize:${CHAIN_ID}:`;

let runtime: RelayerStoreRuntime;

beforeAll(async () => {
  runtime = await relayerStoreRuntime("relayer_daily_count", 1);
});
afterAll(async () => {
  await runtime?.dispose();
});

const decodeReads = decodeRows(
  Schema.Struct({ seq: Schema.NumberFromString, fetched: Schema.NumberFromString }),
);

/** Authorisation attempts `from`..`to`, each of its own mandate, as the relayer writes them. */
const attempts = (from: number, to: number) =>
  Effect.flatMap(Effect.service(SqlClient.SqlClient), (sql) =>
    sql`INSERT INTO billing.relayer_transactions (id, chain_id, from_address, nonce, to_address, data,
        gas_limit, max_fee_per_gas, max_priority_fee_per_gas, hashes, raw, purpose, action, status)
      SELECT 'rtx_' || i, ${CHAIN_ID}, '0x0000000000000000000000000000000000000e1a', i,
        '0x0000000000000000000000000000000000000e5c', '0x', 0, 0, 0, '{}', '0x',
        ${ACTION}::text || lpad(to_hex(i), 64, '0') || ':0', ${ACTION}::text || lpad(to_hex(i), 64, '0') || ':0',
        'mined'
      FROM generate_series(${from}::int, ${to}::int) i`.pipe(Effect.asVoid),
  );

const mandatePrefix = (n: number) => `${ACTION}${n.toString(16).padStart(64, "0")}:`;

it(`counts a mandate's attempts of the day without reading the chain's ${LARGE} others`, async () => {
  const read = await runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const store = yield* RelayerStore;
      const since = new Date(Date.now() - 86_400_000);
      yield* attempts(1, SMALL);
      // One connection: the counts below share its prepared statement. The first few are planned for
      // their values; from then on Postgres may keep a generic plan, made at this size.
      for (let n = 1; n <= 10; n++)
        expect((yield* store.actionsSince(CHAIN_ID, mandatePrefix(n), since)).count).toBe(1);
      yield* attempts(SMALL + 1, LARGE);
      // The backend's counters not yet flushed include earlier transactions' reads (Postgres flushes
      // them at most once a second): the count's own reads are the difference across it.
      const readSoFar = sql`SELECT coalesce(seq_tup_read, 0)::text AS seq,
          coalesce(idx_tup_fetch, 0)::text AS fetched
        FROM pg_stat_xact_user_tables
        WHERE schemaname = 'billing' AND relname = 'relayer_transactions'`.pipe(
        Effect.flatMap(decodeReads),
        Effect.map(([reads]) => (reads?.seq ?? 0) + (reads?.fetched ?? 0)),
      );
      return yield* sql.withTransaction(
        Effect.gen(function* () {
          const before = yield* readSoFar;
          const counted = yield* store.actionsSince(CHAIN_ID, mandatePrefix(LARGE - 7), since);
          expect(counted.count).toBe(1);
          return (yield* readSoFar) - before;
        }),
      );
    }),
  );
  expect(read).toBeLessThan(100);
});
