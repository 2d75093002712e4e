/**
 * Console sessions: a merchant signs in to `/console` by pasting an API key, which is exchanged for a
 * session whose random token lives only in an `HttpOnly` cookie; the key itself is never stored in the
 * browser. Only the SHA-256 of the token is stored. A session acts as its key (same merchant, mode and
 * idempotency namespace) and ends when it expires, when the merchant signs out, or when the key is
 * revoked (every lookup joins the key).
 *
 * CSRF: mutations must also send `X-CSRF-Token`, derived from the session token (HMAC-style: SHA-256 of
 * a fixed label and the token), which only a page of our own origin can read (from the sign-in answer
 * or `GET /console/session`); the cookie is also `SameSite=Strict`.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { Clock, Context, Effect, Layer, Option, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { ClearedCaches } from "../db/cleared-caches.ts";
import { decodeRows } from "../db/rows.ts";
import { Unauthenticated } from "../errors.ts";
import { newId } from "../ids.ts";
import { ApiKeys, type Caller } from "./api-keys.ts";

/** How long a session lasts after sign-in. */
export const CONSOLE_SESSION_SECONDS = 12 * 3600;
export const CONSOLE_COOKIE = "console_session";
export const CONSOLE_TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

const sha256 = (text: string) => createHash("sha256").update(text, "utf8").digest();

/** The CSRF token of a session: derived, so nothing more is stored and a page can read it again. */
export const csrfTokenOf = (sessionToken: string): string =>
  createHash("sha256").update(`console-csrf\0${sessionToken}`, "utf8").digest("base64url");

export const csrfTokenMatches = (sessionToken: string, sent: string | undefined): boolean => {
  if (sent === undefined) return false;
  const expected = Buffer.from(csrfTokenOf(sessionToken));
  const given = Buffer.from(sent);
  return given.length === expected.length && timingSafeEqual(given, expected);
};

export interface ConsoleSession {
  readonly id: string;
  readonly caller: Caller;
  readonly expiresAt: Date;
}

export interface StartedSession extends ConsoleSession {
  /** The cookie's value: shown once, never stored. */
  readonly token: string;
}

const SessionRow = Schema.Struct({
  id: Schema.String,
  api_key_id: Schema.String,
  merchant_id: Schema.String,
  livemode: Schema.Boolean,
  restricted: Schema.Boolean,
  expires_at: Schema.Date,
});
const decodeSessions = decodeRows(SessionRow);

const toSession = (row: typeof SessionRow.Type): ConsoleSession => ({
  id: row.id,
  caller: {
    merchantId: row.merchant_id,
    apiKeyId: row.api_key_id,
    livemode: row.livemode,
    restricted: row.restricted,
  },
  expiresAt: row.expires_at,
});

const noSession = new Unauthenticated({
  code: "console_session_invalid",
  message: "Your console session ended (signed out, expired, or its API key was revoked). Sign in again.",
});

export class ConsoleSessions extends Context.Service<
  ConsoleSessions,
  {
    /** Exchanges an API key (`Bearer`-less) for a new session. */
    readonly signIn: (apiKey: string) => Effect.Effect<StartedSession, Unauthenticated | SqlError.SqlError>;
    readonly authenticate: (
      token: string,
    ) => Effect.Effect<ConsoleSession, Unauthenticated | SqlError.SqlError>;
    readonly signOut: (token: string) => Effect.Effect<void, SqlError.SqlError>;
  }
>()("ConsoleSessions") {
  static readonly layer = Layer.effect(
    ConsoleSessions,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const keys = yield* ApiKeys;

      const signIn = (apiKey: string) =>
        Effect.gen(function* () {
          const caller = yield* keys.authenticate(`Bearer ${apiKey}`);
          const token = randomBytes(32).toString("base64url");
          const id = yield* newId("consoleSession");
          const now = yield* Clock.currentTimeMillis;
          // Sessions that ended more than a day ago are of no use to anyone: sign-in tidies them.
          yield* sql`DELETE FROM billing.console_sessions
                     WHERE coalesce(ended_at, expires_at) < now() - interval '1 day'`;
          const rows = yield* sql`
            INSERT INTO billing.console_sessions ${sql.insert({
              id,
              api_key_id: caller.apiKeyId,
              token_sha256: sha256(token),
              expires_at: new Date(now + CONSOLE_SESSION_SECONDS * 1000),
            })}
            RETURNING id, api_key_id, ${caller.merchantId}::text AS merchant_id,
                      ${caller.livemode}::boolean AS livemode, ${caller.restricted}::boolean AS restricted,
                      expires_at`.pipe(Effect.flatMap(decodeSessions));
          const row = rows[0];
          if (row === undefined)
            return yield* Effect.die(new Error("console session insert returned nothing"));
          return { ...toSession(row), token };
        });

      /** A live session of an active key, by the token's SHA-256 (hex): what the cache keeps. */
      const lookup = (sha256Hex: string) =>
        Effect.gen(function* () {
          const rows = yield* sql`
            SELECT s.id, s.api_key_id, k.merchant_id, k.livemode, k.restricted, s.expires_at
            FROM billing.console_sessions s JOIN billing.api_keys k ON k.id = s.api_key_id
            WHERE s.token_sha256 = ${Buffer.from(sha256Hex, "hex")} AND s.ended_at IS NULL
              AND s.expires_at > now() AND k.revoked_at IS NULL`.pipe(Effect.flatMap(decodeSessions));
          const row = rows[0];
          return row === undefined ? yield* noSession : toSession(row);
        });
      const sessions = yield* ClearedCaches.cacheFor(lookup);
      const revocations = yield* Effect.serviceOption(ClearedCaches);

      const authenticate = (token: string) =>
        Effect.gen(function* () {
          if (!CONSOLE_TOKEN_PATTERN.test(token)) return yield* noSession;
          const session = yield* sessions.get(sha256(token).toString("hex"));
          // A cached session still ends on time.
          if (session.expiresAt.getTime() <= (yield* Clock.currentTimeMillis)) return yield* noSession;
          return session;
        });

      const signOut = (token: string) =>
        sql`UPDATE billing.console_sessions SET ended_at = coalesce(ended_at, now())
            WHERE token_sha256 = ${sha256(token)}`.pipe(
          Effect.andThen(Option.match(revocations, { onNone: () => Effect.void, onSome: (r) => r.clearAll })),
        );

      return { signIn, authenticate, signOut };
    }),
  );
}
