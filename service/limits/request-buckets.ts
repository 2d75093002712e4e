/**
 * The one writer of `billing.request_buckets`: token buckets every service process shares, counted on
 * the database's clock. A process takes several tokens at a time (a lease, limits/request-limits.ts), so
 * the buckets are read and written once per lease, not once per request. Each take reads the bucket,
 * computes it with limits/token-bucket.ts and writes it back only if no other process wrote it meanwhile
 * (its `version`); a process that lost that race reads again.
 */
import { Effect, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { decodeRows } from "../db/rows.ts";
import { type BucketPolicy, fullBucket, take } from "./token-bucket.ts";

/** A take that keeps losing the race to other processes gives up after this many reads: no token. */
const MAX_ATTEMPTS = 5;

const decodeBucket = decodeRows(
  Schema.Struct({
    tokens: Schema.NullOr(Schema.Number),
    at: Schema.NullOr(Schema.Number),
    version: Schema.NullOr(Schema.Number),
    now: Schema.Number,
  }),
);

export interface BucketTake {
  readonly granted: number;
  /** Tokens left in the shared bucket after the take. */
  readonly left: number;
  /** Seconds until it holds a whole token again (0 when one is left). */
  readonly waitSeconds: number;
}

/** Takes up to `want` tokens from the shared bucket `key`; a bucket never seen before starts full. */
export const takeTokens = (
  key: string,
  policy: BucketPolicy,
  want: number,
): Effect.Effect<BucketTake, SqlError.SqlError, SqlClient.SqlClient> =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const [row] = yield* sql`
        SELECT b.tokens, b.at, b.version::float8 AS version, extract(epoch FROM clock_timestamp())::float8 AS now
        FROM (SELECT 1) AS one LEFT JOIN billing.request_buckets b ON b.key = ${key}`.pipe(
        Effect.flatMap(decodeBucket),
      );
      if (row === undefined) break;
      const state =
        row.tokens === null || row.at === null
          ? fullBucket(policy, row.now)
          : { tokens: row.tokens, at: row.at };
      const taken = take(policy, state, row.now, want);
      const answer = { granted: taken.granted, left: taken.state.tokens, waitSeconds: taken.waitSeconds };
      // Nothing taken changes nothing: the refill is computed again at the next read.
      if (taken.granted === 0) return answer;
      const written =
        row.version === null
          ? yield* sql`INSERT INTO billing.request_buckets (key, tokens, at, version)
              VALUES (${key}, ${taken.state.tokens}, ${taken.state.at}, 0)
              ON CONFLICT (key) DO NOTHING RETURNING 1 AS written`
          : yield* sql`UPDATE billing.request_buckets
              SET tokens = ${taken.state.tokens}, at = ${taken.state.at}, version = version + 1
              WHERE key = ${key} AND version = ${row.version} RETURNING 1 AS written`;
      if (written.length > 0) return answer;
    }
    return { granted: 0, left: 0, waitSeconds: 1 / policy.perSecond };
  });
