/**
 * The one writer of `billing.rate_limits`: request counters in fixed one-minute windows, in Postgres so
 * that every service process shares the same counts. The windows that ended are deleted by the first
 * request of a new window.
 */
import { Effect, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { decodeRows } from "../db/rows.ts";
import { RateLimited } from "../errors.ts";

const WINDOW_SECONDS = 60;

const decodeCounts = decodeRows(
  Schema.Struct({ key: Schema.String, hits: Schema.Number, retry_after: Schema.Number }),
);

/**
 * Counts one request against each key; fails with 429 when any key is over its limit. The counters of
 * windows that ended are deleted by the first request of a new window.
 */
export const countRequest = (
  keys: ReadonlyArray<{ readonly key: string; readonly limit: number }>,
): Effect.Effect<void, RateLimited | SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const limited = keys.filter((k) => k.limit > 0);
    if (limited.length === 0) return;
    const sql = yield* SqlClient.SqlClient;
    const rows = yield* sql`
      INSERT INTO billing.rate_limits AS r (key, window_start, hits)
      SELECT k, to_timestamp(floor(extract(epoch FROM now()) / ${WINDOW_SECONDS}) * ${WINDOW_SECONDS}), 1
      FROM unnest(${limited.map((k) => k.key)}::text[]) AS k
      ON CONFLICT (key, window_start) DO UPDATE SET hits = r.hits + 1
      RETURNING key, hits,
        ceil(extract(epoch FROM window_start + make_interval(secs => ${WINDOW_SECONDS}) - now()))::int AS retry_after`.pipe(
      Effect.flatMap(decodeCounts),
    );
    if (rows.some((row) => row.hits === 1))
      yield* sql`DELETE FROM billing.rate_limits
        WHERE window_start < now() - make_interval(secs => ${2 * WINDOW_SECONDS})`;
    for (const row of rows) {
      const limit = limited.find((k) => k.key === row.key)?.limit ?? 0;
      if (row.hits > limit)
        return yield* new RateLimited({
          code: "rate_limited",
          message: `Too many requests (${limit} a minute allowed). Retry after ${row.retry_after} seconds.`,
          retryAfterSeconds: row.retry_after,
        });
    }
  });
