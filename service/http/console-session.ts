/**
 * The console's sign-in over HTTP, and how a request authenticates: `Authorization: Bearer <key>` as
 * any merchant's code does, or else the console's session cookie, for which every POST must also carry
 * the session's `X-CSRF-Token` and, when the browser sends one, an `Origin` of this service. The console
 * then calls the same `/v1` routes as everyone (no other way in).
 *
 * - `POST /console/session` `{"api_key": "sk_…"}` → the session (mode, merchant, CSRF token, expiry) and
 *   the cookie `__Host-console_session` (`HttpOnly`, `SameSite=Strict`, `Secure`, `Path=/`, no `Domain`;
 *   see `consoleCookie` for the one exception).
 * - `GET /console/session` → the session of the cookie (the page reads its CSRF token here).
 * - `POST /console/session/end` → signs out and clears the cookie: only a live session, with its CSRF
 *   token (else 401 or 403, nothing changed).
 *
 * Every `/console` route is counted by the hosted pages' per-address rate limit (page-rate-limit.ts).
 */
import { Effect, Result, Schema } from "effect";
import type { SqlError } from "effect/sql";
import type { Hono, Context as HonoContext } from "hono";
import { deleteCookie, getCookie, setCookie } from "hono/cookie";
import type { CookieOptions } from "hono/utils/cookie";
import { ApiKeys, type Caller } from "../auth/api-keys.ts";
import {
  CONSOLE_COOKIE,
  CONSOLE_SESSION_SECONDS,
  type ConsoleSession,
  ConsoleSessions,
  csrfTokenMatches,
  csrfTokenOf,
} from "../auth/console-sessions.ts";
import { type ApiFailure, HttpRefusal, Unauthenticated } from "../errors.ts";
import type { Env } from "./app.ts";
import { readBody } from "./request-input.ts";

const SignIn = Schema.Struct({ api_key: Schema.String });

const csrfRefused = (message: string) =>
  new HttpRefusal({ status: 403, code: "console_csrf_invalid", message });

/** Hosts a browser treats as a secure context over plain http, where it accepts a `Secure` cookie. */
const LOOPBACK_HOST = /^(localhost|.+\.localhost|127(\.\d{1,3}){3}|\[::1\])$/;

/** Reads, sets and clears the console's session cookie. */
export interface ConsoleCookie {
  readonly read: (c: HonoContext<Env>) => string | undefined;
  readonly write: (c: HonoContext<Env>, token: string) => void;
  readonly clear: (c: HonoContext<Env>) => void;
}

/**
 * The session cookie is `__Host-console_session`: `Secure`, `Path=/` and no `Domain`, so a sibling
 * subdomain can neither plant nor overwrite it. A browser accepts a `Secure` cookie only from a secure
 * context: a request over https, one behind a proxy whose public URL is https (the request itself looks
 * like plain http there), or a loopback address. A console served over plain http on any other address,
 * which anyone on the network can rewrite anyway, gets the unprefixed `console_session` without
 * `Secure`. Each origin reads only its own name: a planted unprefixed cookie is never read where the
 * prefixed one is used.
 */
export const consoleCookie = (publicUrl: string | undefined): ConsoleCookie => {
  const prefixed = (c: HonoContext<Env>) => {
    const url = new URL(c.req.url);
    return (
      url.protocol === "https:" ||
      publicUrl?.startsWith("https:") === true ||
      LOOPBACK_HOST.test(url.hostname)
    );
  };
  const attributes = (c: HonoContext<Env>): CookieOptions => ({
    httpOnly: true,
    sameSite: "Strict",
    path: "/",
    ...(prefixed(c) ? { prefix: "host", secure: true } : { secure: false }),
  });
  return {
    read: (c) => getCookie(c, CONSOLE_COOKIE, prefixed(c) ? "host" : undefined),
    write: (c, token) =>
      setCookie(c, CONSOLE_COOKIE, token, { ...attributes(c), maxAge: CONSOLE_SESSION_SECONDS }),
    clear: (c) => deleteCookie(c, CONSOLE_COOKIE, attributes(c)),
  };
};

/** A browser's Origin must be ours; a request without one (not a browser) is judged by the token alone. */
const sameOrigin = (c: HonoContext<Env>) => {
  const origin = c.req.header("origin");
  return origin === undefined || origin === new URL(c.req.url).origin;
};

const notSignedIn = new Unauthenticated({
  code: "console_session_invalid",
  message: "Not signed in to the console.",
});

const sessionBody = (session: ConsoleSession, token: string) => ({
  object: "console_session",
  livemode: session.caller.livemode,
  merchant: session.caller.merchantId,
  read_only: session.caller.restricted,
  csrf_token: csrfTokenOf(token),
  expires_at: Math.floor(session.expiresAt.getTime() / 1000),
});

/** The caller of a `/v1` request: its API key, or the console session of its cookie. */
export const authenticateRequest = (
  c: HonoContext<Env>,
  cookie: ConsoleCookie,
): Effect.Effect<Caller, SqlError.SqlError | Unauthenticated | HttpRefusal, ApiKeys | ConsoleSessions> => {
  const authorization = c.req.header("authorization");
  const token = authorization === undefined ? cookie.read(c) : undefined;
  // An API key, the usual case, without a generator function created per request (~2 µs each).
  if (token === undefined) return Effect.flatMap(ApiKeys, (keys) => keys.authenticate(authorization));
  return consoleCaller(c, token);
};

const consoleCaller = (c: HonoContext<Env>, token: string) =>
  Effect.gen(function* () {
    const session = yield* Effect.flatMap(ConsoleSessions, (sessions) => sessions.authenticate(token));
    if (c.req.method !== "GET" && c.req.method !== "HEAD") {
      if (!sameOrigin(c))
        return yield* csrfRefused("Console requests must come from the console's own origin.");
      if (!csrfTokenMatches(token, c.req.header("x-csrf-token")))
        return yield* csrfRefused(
          "This console request lacks the session's X-CSRF-Token header (read it from GET /console/session).",
        );
    }
    return session.caller satisfies Caller;
  });

/** Runs a console effect and answers its value (`ok`) or its failure in the one error shape. */
export type ConsoleHandler = <A>(
  c: HonoContext<Env>,
  effect: Effect.Effect<A, ApiFailure | SqlError.SqlError, ApiKeys | ConsoleSessions>,
  ok: (value: A) => Response,
) => Promise<Response>;

export const registerConsoleSessionRoutes = (
  app: Hono<Env>,
  handle: ConsoleHandler,
  cookie: ConsoleCookie,
): void => {
  app.post("/console/session", async (c) => {
    const body = await readBody(c, SignIn as unknown as Schema.Codec<unknown, unknown>);
    const signIn = Result.isFailure(body)
      ? Effect.fail(body.failure)
      : Effect.flatMap(ConsoleSessions, (sessions) =>
          sessions.signIn((body.success.value as typeof SignIn.Type).api_key),
        );
    return handle(c, signIn, (session) => {
      cookie.write(c, session.token);
      return c.json(sessionBody(session, session.token), 200, { "cache-control": "no-store" });
    });
  });

  app.get("/console/session", async (c) => {
    const token = cookie.read(c);
    const session =
      token === undefined
        ? Effect.fail(notSignedIn)
        : Effect.flatMap(ConsoleSessions, (sessions) => sessions.authenticate(token));
    return handle(c, session, (found) =>
      c.json(sessionBody(found, token ?? ""), 200, { "cache-control": "no-store" }),
    );
  });

  app.post("/console/session/end", async (c) => {
    const token = cookie.read(c);
    // Only a live session, with its CSRF token and our Origin, is ended: a forged or stale cookie gets
    // the 401 (or 403) of any console request and changes nothing (ending a session clears every
    // process's credential caches).
    const end = Effect.gen(function* () {
      if (token === undefined) return yield* notSignedIn;
      yield* consoleCaller(c, token);
      yield* Effect.flatMap(ConsoleSessions, (sessions) => sessions.signOut(token));
    });
    return handle(c, end, () => {
      cookie.clear(c);
      return c.json({ object: "console_session", ended: true }, 200, { "cache-control": "no-store" });
    });
  });
};
