/**
 * The console's sign-in over HTTP, and how a request authenticates: `Authorization: Bearer <key>` as
 * any merchant's code does, or else the console's session cookie, for which every POST must also carry
 * the session's `X-CSRF-Token` and, when the browser sends one, an `Origin` of this service. The console
 * then calls the same `/v1` routes as everyone (no other way in).
 *
 * - `POST /console/session` `{"api_key": "sk_…"}` → the session (mode, merchant, CSRF token, expiry) and
 *   the cookie `console_session` (`HttpOnly`, `SameSite=Strict`, `Path=/`, `Secure` over https).
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

/**
 * `Secure` when the request came over https or the service's public URL is https (behind a proxy that
 * ends TLS, the request itself looks like plain http).
 */
const secureCookie = (c: HonoContext<Env>, publicUrl: string | undefined) =>
  new URL(c.req.url).protocol === "https:" || (publicUrl?.startsWith("https:") ?? false);

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
): Effect.Effect<Caller, SqlError.SqlError | Unauthenticated | HttpRefusal, ApiKeys | ConsoleSessions> => {
  const authorization = c.req.header("authorization");
  const token = authorization === undefined ? getCookie(c, CONSOLE_COOKIE) : undefined;
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
  publicUrl: string | undefined,
): void => {
  app.post("/console/session", async (c) => {
    const body = await readBody(c, SignIn as unknown as Schema.Codec<unknown, unknown>);
    const signIn = Result.isFailure(body)
      ? Effect.fail(body.failure)
      : Effect.flatMap(ConsoleSessions, (sessions) =>
          sessions.signIn((body.success.value as typeof SignIn.Type).api_key),
        );
    return handle(c, signIn, (session) => {
      setCookie(c, CONSOLE_COOKIE, session.token, {
        httpOnly: true,
        sameSite: "Strict",
        secure: secureCookie(c, publicUrl),
        path: "/",
        maxAge: CONSOLE_SESSION_SECONDS,
      });
      return c.json(sessionBody(session, session.token), 200, { "cache-control": "no-store" });
    });
  });

  app.get("/console/session", async (c) => {
    const token = getCookie(c, CONSOLE_COOKIE);
    const session =
      token === undefined
        ? Effect.fail(notSignedIn)
        : Effect.flatMap(ConsoleSessions, (sessions) => sessions.authenticate(token));
    return handle(c, session, (found) =>
      c.json(sessionBody(found, token ?? ""), 200, { "cache-control": "no-store" }),
    );
  });

  app.post("/console/session/end", async (c) => {
    const token = getCookie(c, CONSOLE_COOKIE);
    // Only a live session, with its CSRF token and our Origin, is ended: a forged or stale cookie gets
    // the 401 (or 403) of any console request and changes nothing (ending a session clears every
    // process's credential caches).
    const end = Effect.gen(function* () {
      if (token === undefined) return yield* notSignedIn;
      yield* consoleCaller(c, token);
      yield* Effect.flatMap(ConsoleSessions, (sessions) => sessions.signOut(token));
    });
    return handle(c, end, () => {
      deleteCookie(c, CONSOLE_COOKIE, {
        path: "/",
        secure: secureCookie(c, publicUrl),
        httpOnly: true,
        sameSite: "Strict",
      });
      return c.json({ object: "console_session", ended: true }, 200, { "cache-control": "no-store" });
    });
  });
};
