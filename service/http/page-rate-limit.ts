/**
 * Request limits of the routes that need no API key: the hosted pages (`/authorize/…`, `/pay/…`,
 * `/portal/…`) and the console's page, assets and sign-in (`/console…`), per client (an IPv4 address, or
 * an IPv6 /64: limits/client-key.ts) and per page token (an authorization's, a payment's or a portal
 * session's), counted in fixed one-minute windows shared by every service process
 * (limits/request-counts.ts). A token is counted only once it is known to name a page: a random one costs
 * its client's budget and no counter of its own. Beyond a limit: 429
 * `rate_limited` with `Retry-After`.
 */
import { Effect } from "effect";
import type { SqlClient } from "effect/sql";
import type { Context as HonoContext } from "hono";
import type { RateLimited } from "../errors.ts";
import { clientKey } from "../limits/client-key.ts";
import { countRequest } from "../limits/request-counts.ts";
import { AUTHORIZATION_TOKEN_PATTERN } from "../mandates/authorization-session.ts";
import { PAY_PAGE_TOKEN_PATTERN } from "../payments/pay-session.ts";
import { PORTAL_TOKEN_PATTERN } from "../portal/portal-sessions.ts";

export interface PageRateLimits {
  /** Requests per minute from one client (IPv4 address or IPv6 /64) to the page and its API; 0: unlimited. */
  readonly perAddressPerMinute: number;
  /** Requests per minute naming one page token; 0: unlimited. */
  readonly perTokenPerMinute: number;
  /** Take the client address from X-Forwarded-For (behind a proxy this service trusts). */
  readonly trustProxy: boolean;
}

export type PageKind = "authorize" | "pay" | "portal";

/** Whether a well-formed token names a page of its kind (an unexpired one, for the portal). */
export type PageTokenExists = (page: PageKind, token: string) => Promise<boolean>;

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

const TOKEN_PATTERNS: Readonly<Record<PageKind, RegExp>> = {
  authorize: AUTHORIZATION_TOKEN_PATTERN,
  pay: PAY_PAGE_TOKEN_PATTERN,
  portal: PORTAL_TOKEN_PATTERN,
};

const isPageKind = (name: string | undefined): name is PageKind =>
  name === "authorize" || name === "pay" || name === "portal";

/** The page and token a path names, if any (`/authorize/{token}`, `/pay/{token}`, `/portal/{token}` and their APIs). */
export const tokenOfPath = (
  path: string,
): { readonly page: PageKind; readonly token: string } | undefined => {
  const match = /^\/(authorize|pay|portal)\/([^/]+)(?:\/|$)/.exec(path);
  const page = match?.[1];
  const token = match?.[2];
  if (token === undefined || !isPageKind(page)) return undefined;
  return TOKEN_PATTERNS[page].test(token) ? { page, token } : undefined;
};

/** The counters one page request may count against: its client's, and its token's once that is known. */
export const pageRequestKeys = (
  limits: PageRateLimits,
  request: {
    readonly path: string;
    readonly socketAddress: string | undefined;
    readonly forwardedFor?: string;
  },
) => {
  const address = clientAddress(request.socketAddress, request.forwardedFor, limits.trustProxy);
  const named = tokenOfPath(request.path);
  return {
    client: { key: `page:client:${clientKey(address)}`, limit: limits.perAddressPerMinute },
    token:
      named === undefined
        ? undefined
        : { ...named, key: `page:token:${named.token}`, limit: limits.perTokenPerMinute },
  };
};

const socketAddressOf = (c: HonoContext): string | undefined => {
  const env = c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined;
  return env?.incoming?.socket?.remoteAddress;
};

/**
 * The check the HTTP layer runs before every `/authorize/*`, `/pay/*`, `/portal/*`, `/assets/*` and
 * `/console…` request: the refusal, if any. The client is counted while the token is looked up; the token
 * is counted only if it names a page. A database that does not answer lets the request through (the limits protect the
 * relayer, which has its own budget, and must not take the page down with them).
 */
export const pageLimiter =
  (
    limits: PageRateLimits,
    tokenExists: PageTokenExists,
    run: <A>(effect: Effect.Effect<A, never, SqlClient.SqlClient>) => Promise<A>,
  ) =>
  async (c: HonoContext): Promise<RateLimited | undefined> => {
    const forwardedFor = c.req.header("x-forwarded-for");
    const { client, token } = pageRequestKeys(limits, {
      path: c.req.path,
      socketAddress: socketAddressOf(c),
      ...(forwardedFor === undefined ? {} : { forwardedFor }),
    });
    const count = (key: { readonly key: string; readonly limit: number }) =>
      run(
        countRequest([key]).pipe(
          Effect.as(undefined),
          Effect.catchTag("RateLimited", (refusal) => Effect.succeed(refusal)),
          Effect.catchTag("SqlError", (error) =>
            Effect.as(Effect.logWarning("page rate limit not checked", error.message), undefined),
          ),
        ),
      );
    const countsToken = token !== undefined && token.limit > 0;
    const [refusal, known] = await Promise.all([
      count(client),
      countsToken ? tokenExists(token.page, token.token).catch(() => false) : false,
    ]);
    if (refusal !== undefined || !known || token === undefined) return refusal;
    return count(token);
  };
