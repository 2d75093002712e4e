/**
 * Request limits of the hosted authorization page (`/authorize/…`), whose routes need no API key: per
 * client address and per authorization token, in fixed one-minute windows counted in Postgres, so that
 * every service process shares the same counts. Beyond a limit: 429 `rate_limited` with `Retry-After`.
 */
import { Effect } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import type { Context as HonoContext } from "hono";
import { RateLimited } from "../errors.ts";

export interface PageRateLimits {
  /** Requests per minute from one client address to the page and its API; 0: unlimited. */
  readonly perAddressPerMinute: number;
  /** Requests per minute naming one authorization token; 0: unlimited. */
  readonly perTokenPerMinute: number;
  /** Take the client address from X-Forwarded-For (behind a proxy this service trusts). */
  readonly trustProxy: boolean;
}

const WINDOW_SECONDS = 60;

/**
 * The client's address: the socket's remote address, or, only when the proxy in front is trusted,
 * the right-most X-Forwarded-For entry (the one that proxy appended; entries left of it are the
 * client's own claims).
 */
export const clientAddress = (
  socketAddress: string | undefined,
  forwardedFor: string | undefined,
  trustProxy: boolean,
): string => {
  if (trustProxy && forwardedFor) {
    const last = forwardedFor
      .split(",")
      .map((part) => part.trim())
      .filter((part) => part.length > 0)
      .at(-1);
    if (last) return last.slice(0, 64);
  }
  return socketAddress ?? "unknown";
};

/** The authorization token a page path names, if any (`/authorize/{token}` and its API). */
export const tokenOfPath = (path: string): string | undefined => {
  const match = /^\/authorize\/([A-Za-z0-9_-]{20,80})(?:\/|$)/.exec(path);
  return match?.[1];
};

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
    const rows = yield* sql<{ key: string; hits: number; retry_after: number }>`
      INSERT INTO billing.rate_limits AS r (key, window_start, hits)
      SELECT k, to_timestamp(floor(extract(epoch FROM now()) / ${WINDOW_SECONDS}) * ${WINDOW_SECONDS}), 1
      FROM unnest(${limited.map((k) => k.key)}::text[]) AS k
      ON CONFLICT (key, window_start) DO UPDATE SET hits = r.hits + 1
      RETURNING key, hits,
        ceil(extract(epoch FROM window_start + make_interval(secs => ${WINDOW_SECONDS}) - now()))::int AS retry_after`;
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

/** The keys and limits one page request counts against. */
export const pageRequestKeys = (
  limits: PageRateLimits,
  request: {
    readonly path: string;
    readonly socketAddress: string | undefined;
    readonly forwardedFor?: string;
  },
) => {
  const keys = [
    {
      key: `page:address:${clientAddress(request.socketAddress, request.forwardedFor, limits.trustProxy)}`,
      limit: limits.perAddressPerMinute,
    },
  ];
  const token = tokenOfPath(request.path);
  if (token !== undefined) keys.push({ key: `page:token:${token}`, limit: limits.perTokenPerMinute });
  return keys;
};

const socketAddressOf = (c: HonoContext): string | undefined => {
  const env = c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined;
  return env?.incoming?.socket?.remoteAddress;
};

/**
 * The check the HTTP layer runs before every `/authorize/*` request: the refusal to render, if any. A
 * database that does not answer lets the request through (the limits protect the relayer, which has
 * its own budget, and must not take the page down with them).
 */
export const pageLimiter =
  (limits: PageRateLimits, run: <A>(effect: Effect.Effect<A, never, SqlClient.SqlClient>) => Promise<A>) =>
  (c: HonoContext): Promise<RateLimited | undefined> => {
    const forwardedFor = c.req.header("x-forwarded-for");
    const keys = pageRequestKeys(limits, {
      path: c.req.path,
      socketAddress: socketAddressOf(c),
      ...(forwardedFor === undefined ? {} : { forwardedFor }),
    });
    return run(
      countRequest(keys).pipe(
        Effect.as(undefined),
        Effect.catchTag("RateLimited", (refusal) => Effect.succeed(refusal)),
        Effect.catchTag("SqlError", (error) =>
          Effect.as(Effect.logWarning("page rate limit not checked", error.message), undefined),
        ),
      ),
    );
  };
