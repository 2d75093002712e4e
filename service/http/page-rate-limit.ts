/**
 * Request limits of the routes that need no API key: the hosted pages (`/authorize/…`, `/pay/…`,
 * `/portal/…`) and the console's page, assets and sign-in (`/console…`), per client address and per page
 * token (an authorization's, a payment's or a portal session's), counted in fixed one-minute
 * windows shared by every service process (limits/request-counts.ts). Beyond a limit: 429
 * `rate_limited` with `Retry-After`.
 */
import { Effect } from "effect";
import type { SqlClient } from "effect/sql";
import type { Context as HonoContext } from "hono";
import type { RateLimited } from "../errors.ts";
import { countRequest } from "../limits/request-counts.ts";
import { AUTHORIZATION_TOKEN_PATTERN } from "../mandates/authorization-session.ts";
import { PAY_PAGE_TOKEN_PATTERN } from "../payments/pay-session.ts";
import { PORTAL_TOKEN_PATTERN } from "../portal/portal-sessions.ts";

export interface PageRateLimits {
  /** Requests per minute from one client address to the page and its API; 0: unlimited. */
  readonly perAddressPerMinute: number;
  /** Requests per minute naming one page token; 0: unlimited. */
  readonly perTokenPerMinute: number;
  /** Take the client address from X-Forwarded-For (behind a proxy this service trusts). */
  readonly trustProxy: boolean;
}

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

const TOKEN_PATTERNS: Readonly<Record<string, RegExp>> = {
  authorize: AUTHORIZATION_TOKEN_PATTERN,
  pay: PAY_PAGE_TOKEN_PATTERN,
  portal: PORTAL_TOKEN_PATTERN,
};

/** The token a page path names, if any (`/authorize/{token}`, `/pay/{token}`, `/portal/{token}` and their APIs). */
export const tokenOfPath = (path: string): string | undefined => {
  const match = /^\/(authorize|pay|portal)\/([^/]+)(?:\/|$)/.exec(path);
  const token = match?.[2];
  const pattern = TOKEN_PATTERNS[match?.[1] ?? ""];
  if (token === undefined || pattern === undefined) return undefined;
  return pattern.test(token) ? token : undefined;
};

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
 * The check the HTTP layer runs before every `/authorize/*`, `/pay/*`, `/portal/*`, `/assets/*` and
 * `/console…` request: the refusal, if any. A database that does not answer lets the request through (the limits protect the
 * relayer, which has its own budget, and must not take the page down with them).
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
