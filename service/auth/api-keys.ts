/**
 * API keys: secret keys `sk_test_…` and `sk_live_…`, and restricted keys `rk_test_…` and `rk_live_…` that
 * can read everything and change nothing (for finance; the HTTP layer refuses them every method but
 * GET). 32 random bytes in base62. Only the SHA-256 of a key is stored (keys are high-entropy, so a fast
 * hash is enough, as for GitHub and Stripe tokens); the clear key is returned once, when it is created.
 */
import { hash, randomBytes } from "node:crypto";
import { Context, Effect, Layer, Option, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { ClearedCaches } from "../db/cleared-caches.ts";
import { decodeRows } from "../db/rows.ts";
import { NotFound, Unauthenticated } from "../errors.ts";
import { newId } from "../ids.ts";
import type { MerchantScope } from "../merchants/scope.ts";

/**
 * An authenticated API request: the merchant and mode of its key, the key (idempotency is per key), and
 * whether the key is restricted (read-only).
 */
export interface Caller extends MerchantScope {
  readonly apiKeyId: string;
  readonly restricted: boolean;
}

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
export const API_KEY_PATTERN = /^(sk|rk)_(test|live)_[0-9A-Za-z]{20,64}$/;

const base62 = (bytes: Uint8Array): string => {
  let n = BigInt(`0x${Buffer.from(bytes).toString("hex")}`);
  let out = "";
  while (n > 0n) {
    out = BASE62[Number(n % 62n)] + out;
    n /= 62n;
  }
  return out.padStart(43, "0");
};

export const generateApiKey = (livemode: boolean, restricted = false): string =>
  `${restricted ? "rk" : "sk"}_${livemode ? "live" : "test"}_${base62(randomBytes(32))}`;

/** Whether a key, by its prefix, is a restricted one. */
export const isRestrictedKey = (key: string): boolean => key.startsWith("rk_");

export const hashApiKey = (key: string): Buffer => hash("sha256", key, "buffer");

export const redactApiKey = (key: string): string => `${key.slice(0, 8)}…${key.slice(-4)}`;

const ApiKeyRow = Schema.Struct({
  id: Schema.String,
  merchant_id: Schema.String,
  livemode: Schema.Boolean,
  restricted: Schema.Boolean,
  redacted: Schema.String,
  created_at: Schema.Date,
  revoked_at: Schema.NullOr(Schema.Date),
});
export type ApiKeyRecord = typeof ApiKeyRow.Type;
const decodeKeys = decodeRows(ApiKeyRow);
const decodeCallers = decodeRows(
  Schema.Struct({
    id: Schema.String,
    merchant_id: Schema.String,
    livemode: Schema.Boolean,
    restricted: Schema.Boolean,
  }),
);

export interface CreatedApiKey {
  readonly record: ApiKeyRecord;
  /** The clear key: shown once, never stored. */
  readonly secret: string;
}

const missingKey = new Unauthenticated({
  code: "api_key_missing",
  message: "No API key provided. Send it as `Authorization: Bearer sk_test_...`.",
});
const malformedKey = new Unauthenticated({
  code: "api_key_malformed",
  message:
    "The Authorization header must be `Bearer <API key>`, with a key that starts with sk_test_, sk_live_, rk_test_ or rk_live_.",
});
const unknownKey = new Unauthenticated({ code: "api_key_invalid", message: "Invalid API key provided." });

export class ApiKeys extends Context.Service<
  ApiKeys,
  {
    readonly authenticate: (
      authorization: string | undefined,
    ) => Effect.Effect<Caller, Unauthenticated | SqlError.SqlError>;
    /**
     * Creates a key, restricted (read-only) or not; with `secret`, stores that exact key (the dev stack's
     * DEV_API_KEY), restricted when it starts `rk_`.
     */
    readonly create: (input: {
      readonly merchantId: string;
      readonly livemode: boolean;
      readonly restricted?: boolean;
      readonly secret?: string;
    }) => Effect.Effect<CreatedApiKey, NotFound | SqlError.SqlError>;
    readonly list: (merchantId: string) => Effect.Effect<readonly ApiKeyRecord[], SqlError.SqlError>;
    readonly revoke: (id: string) => Effect.Effect<ApiKeyRecord, NotFound | SqlError.SqlError>;
  }
>()("ApiKeys") {
  static readonly layer = Layer.effect(
    ApiKeys,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;

      /** The caller of an active key, by the key's SHA-256 (hex): what the cache keeps. */
      const lookup = (sha256Hex: string) =>
        Effect.gen(function* () {
          const rows = yield* sql`
            SELECT id, merchant_id, livemode, restricted FROM billing.api_keys
            WHERE secret_sha256 = ${Buffer.from(sha256Hex, "hex")} AND revoked_at IS NULL`.pipe(
            Effect.flatMap(decodeCallers),
          );
          const row = rows[0];
          if (row === undefined) return yield* unknownKey;
          return {
            merchantId: row.merchant_id,
            apiKeyId: row.id,
            livemode: row.livemode,
            restricted: row.restricted,
          } satisfies Caller;
        });
      const callers = yield* ClearedCaches.cacheFor(lookup);
      const revocations = yield* Effect.serviceOption(ClearedCaches);

      // Every request: no generator function created per call (~2 µs each, docs/performance.md "The API").
      const authenticate = (authorization: string | undefined) => {
        if (authorization === undefined || authorization.trim() === "") return Effect.fail(missingKey);
        const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
        const key = match?.[1];
        if (key === undefined || !API_KEY_PATTERN.test(key)) return Effect.fail(malformedKey);
        return callers.get(hashApiKey(key).toString("hex"));
      };

      const create = (input: {
        readonly merchantId: string;
        readonly livemode: boolean;
        readonly restricted?: boolean;
        readonly secret?: string;
      }) =>
        Effect.gen(function* () {
          const merchants = yield* sql`SELECT 1 FROM billing.merchants WHERE id = ${input.merchantId}`;
          if (merchants.length === 0)
            return yield* new NotFound({
              code: "resource_missing",
              message: `No such merchant: ${input.merchantId}`,
              param: "merchant",
            });
          const secret = input.secret ?? generateApiKey(input.livemode, input.restricted ?? false);
          const id = yield* newId("apiKey");
          const rows = yield* sql`
            INSERT INTO billing.api_keys ${sql.insert({
              id,
              merchant_id: input.merchantId,
              livemode: input.livemode,
              restricted: isRestrictedKey(secret),
              secret_sha256: hashApiKey(secret),
              redacted: redactApiKey(secret),
            })}
            RETURNING id, merchant_id, livemode, restricted, redacted, created_at, revoked_at`;
          const [record] = yield* decodeKeys(rows);
          return { record: record as ApiKeyRecord, secret };
        });

      const list = (merchantId: string) =>
        sql`SELECT id, merchant_id, livemode, restricted, redacted, created_at, revoked_at FROM billing.api_keys
            WHERE merchant_id = ${merchantId} ORDER BY id`.pipe(Effect.flatMap(decodeKeys));

      const revoke = (id: string) =>
        sql`UPDATE billing.api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = ${id}
            RETURNING id, merchant_id, livemode, restricted, redacted, created_at, revoked_at`.pipe(
          Effect.flatMap(decodeKeys),
          Effect.flatMap((rows) =>
            Option.match(Option.fromNullishOr(rows[0]), {
              onNone: () =>
                Effect.fail(
                  new NotFound({ code: "resource_missing", message: `No such API key: ${id}`, param: "id" }),
                ),
              onSome: Effect.succeed,
            }),
          ),
          // Other processes hear the trigger's NOTIFY; this one forgets at once.
          Effect.tap(() =>
            Option.match(revocations, { onNone: () => Effect.void, onSome: (r) => r.clearAll }),
          ),
        );

      return { authenticate, create, list, revoke };
    }),
  );
}
