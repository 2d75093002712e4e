/**
 * Idempotency-Key handling, per API key. The key's record is inserted in the same transaction as
 * the handler's own writes and holds the first response (status and exact body text):
 * - a concurrent duplicate blocks on the uncommitted insert, then replays the committed response;
 * - the same key with another method, path or body is refused with 409 `idempotency_key_reused`;
 * - a handler error the caller caused (4xx) is stored and replayed, its writes rolled back (the attempt's
 *   transaction rolls back and the reply is stored after it; a duplicate that arrives in between runs
 *   the handler itself, and whichever reply is stored first is the one every later duplicate gets);
 * - a failure on our side (5xx, including a 503 for an unreachable chain) stores nothing and fails the
 *   request as such, so retrying with the same key is safe.
 * Records are kept for IDEMPOTENCY_RETENTION_HOURS (default 24) and then deleted by a worker.
 *
 * A handler whose every effect is a write in the request's transaction (`transactional`: no chain
 * transaction, nothing written outside it) saves a round trip: its record is inserted once, after it
 * ran, with its reply. A concurrent duplicate then runs the handler too, waits on the first's record
 * at that insert (the key is unique), rolls its own writes back and replays the first's reply: still
 * one effect and one reply. A run that fails on our side stored nothing and is run again record first,
 * so that what the caller sees is always what the record-first order would give.
 */
import { createHash } from "node:crypto";
import { Context, Data, Duration, Effect, Layer, Schema } from "effect";
import { SqlClient, SqlError } from "effect/sql";
import { decodeRows } from "../db/rows.ts";
import { IdempotencyError } from "../errors.ts";
import { canonicalJson } from "./canonical-json.ts";

export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;

export interface StoredResponse {
  readonly status: number;
  readonly bodyText: string;
  readonly replayed: boolean;
}

export interface IdempotentRequest {
  readonly key: string;
  readonly method: string;
  readonly path: string;
  readonly body: unknown;
}

export const requestFingerprint = (request: IdempotentRequest): Buffer =>
  createHash("sha256")
    .update(`${request.method} ${request.path}\n${canonicalJson(request.body)}`)
    .digest();

const ExistingRow = Schema.Struct({
  request_sha256: Schema.Uint8Array,
  status: Schema.Number,
  response_body: Schema.String,
});
const decodeExisting = decodeRows(ExistingRow);

export const validateIdempotencyKey = (key: string | undefined): Effect.Effect<string, IdempotencyError> => {
  if (key === undefined || key.trim() === "")
    return Effect.fail(
      new IdempotencyError({
        status: 400,
        code: "idempotency_key_missing",
        message: "Every POST needs an Idempotency-Key header (a UUID is a good choice).",
      }),
    );
  if (key.length > IDEMPOTENCY_KEY_MAX_LENGTH || !/^[\x21-\x7e]+$/.test(key))
    return Effect.fail(
      new IdempotencyError({
        status: 400,
        code: "idempotency_key_invalid",
        message: `Idempotency-Key must be 1-${IDEMPOTENCY_KEY_MAX_LENGTH} printable ASCII characters without spaces.`,
      }),
    );
  return Effect.succeed(key);
};

/** A reply as stored and replayed: its status and the exact body text. */
export interface Reply {
  readonly status: number;
  readonly bodyText: string;
}

/** A reply the caller caused: its attempt's writes are rolled back, the reply is stored. */
class Refused extends Data.TaggedError("IdempotencyRefused")<{ readonly reply: Reply }> {}

/** Another request stored a reply under the key first: this attempt's writes are rolled back. */
class Taken extends Data.TaggedError("IdempotencyTaken") {}

export interface RunOptions {
  /**
   * Every effect of the handler is a write in the request's transaction, so a duplicate may run it
   * and roll it back: the record is inserted once, with the reply (one round trip fewer).
   */
  readonly transactional?: boolean;
}

export class Idempotency extends Context.Service<
  Idempotency,
  {
    readonly retention: Duration.Duration;
    /**
     * Runs `handler` once per (API key, Idempotency-Key): its reply is stored with the request's
     * fingerprint and replayed to a retry of the same request. A failure `storable` turns into a reply
     * (the caller's mistakes, 4xx) is stored and replayed too, with the handler's writes rolled back;
     * any other failure stores nothing, so a retry with the same key is safe.
     */
    readonly run: <E, R>(
      apiKeyId: string,
      request: IdempotentRequest,
      handler: Effect.Effect<Reply, E, R>,
      storable: (failure: E) => Reply | undefined,
      options?: RunOptions,
    ) => Effect.Effect<StoredResponse, E | IdempotencyError | SqlError.SqlError, R>;
    /** Deletes records older than the retention; returns how many. */
    readonly purgeExpired: Effect.Effect<number, SqlError.SqlError>;
    /** Deletes every record (a stored reply could name records that no longer exist: crash recovery). */
    readonly forgetAll: Effect.Effect<void, SqlError.SqlError>;
  }
>()("Idempotency") {
  static readonly layer = (retention: Duration.Duration) =>
    Layer.effect(
      Idempotency,
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient;

        /** The record someone else stored under the key: its reply, or a 409 when its request differs. */
        const replayExisting = (apiKeyId: string, key: string, fingerprint: Buffer) =>
          Effect.gen(function* () {
            const [existing] = yield* sql`
              SELECT request_sha256, status, response_body FROM billing.idempotency_keys
              WHERE api_key_id = ${apiKeyId} AND key = ${key}`.pipe(Effect.flatMap(decodeExisting));
            if (existing === undefined) return yield* Effect.die(new Error("idempotency record vanished"));
            if (!Buffer.from(existing.request_sha256).equals(fingerprint))
              return yield* new IdempotencyError({
                status: 409,
                code: "idempotency_key_reused",
                message:
                  "This Idempotency-Key was already used with a different request (method, path or body). Use a new key for a new request.",
              });
            return { status: existing.status, bodyText: existing.response_body, replayed: true };
          });

        const run = <E, R>(
          apiKeyId: string,
          request: IdempotentRequest,
          handler: Effect.Effect<Reply, E, R>,
          storable: (failure: E) => Reply | undefined,
          options: RunOptions = {},
        ) => {
          const fingerprint = requestFingerprint(request);
          const record = (status: number, bodyText: string) => sql`
            INSERT INTO billing.idempotency_keys
              (api_key_id, key, request_sha256, method, path, status, response_body)
            VALUES (${apiKeyId}, ${request.key}, ${fingerprint}, ${request.method}, ${request.path}, ${status}, ${bodyText})
            ON CONFLICT (api_key_id, key) DO NOTHING
            RETURNING 1 AS inserted`;
          const handled = handler.pipe(
            Effect.catch((failure: E): Effect.Effect<never, E | Refused> => {
              const reply = failure instanceof SqlError.SqlError ? undefined : storable(failure);
              return reply ? Effect.fail(new Refused({ reply })) : Effect.fail(failure);
            }),
          );
          type Failure = E | IdempotencyError | SqlError.SqlError;
          /** The record first (a duplicate waits on it), then the handler, then its reply in the record. */
          const recordFirst: Effect.Effect<StoredResponse, Failure | Refused, R> = sql.withTransaction(
            Effect.gen(function* () {
              const inserted = yield* record(0, "");
              if (inserted.length === 0) return yield* replayExisting(apiKeyId, request.key, fingerprint);
              const outcome = yield* handled;
              yield* sql`UPDATE billing.idempotency_keys SET status = ${outcome.status}, response_body = ${outcome.bodyText}
                WHERE api_key_id = ${apiKeyId} AND key = ${request.key}`;
              return { ...outcome, replayed: false };
            }),
          );
          /** The handler, then the record with its reply; a duplicate rolls back at the record. */
          const replyLast: Effect.Effect<StoredResponse, Failure | Refused | Taken, R> = sql.withTransaction(
            Effect.gen(function* () {
              const outcome = yield* handled;
              const inserted = yield* record(outcome.status, outcome.bodyText);
              if (inserted.length === 0) return yield* new Taken();
              return { ...outcome, replayed: false };
            }),
          );
          // A refusal rolls the whole attempt back (no savepoint round trips on the way to a success),
          // then stores its reply on its own. A duplicate that took the key meanwhile ran the handler
          // itself; its stored reply is the one replayed.
          const settle = (attempt: Effect.Effect<StoredResponse, Failure | Refused | Taken, R>) =>
            attempt.pipe(
              Effect.catch(
                (failure): Effect.Effect<StoredResponse, Failure> =>
                  failure instanceof Refused
                    ? Effect.flatMap(record(failure.reply.status, failure.reply.bodyText), (inserted) =>
                        inserted.length === 0
                          ? replayExisting(apiKeyId, request.key, fingerprint)
                          : Effect.succeed({ ...failure.reply, replayed: false }),
                      )
                    : failure instanceof Taken
                      ? replayExisting(apiKeyId, request.key, fingerprint)
                      : Effect.fail(failure),
              ),
            );
          if (!options.transactional) return settle(recordFirst);
          // A failure on our side in the reply-last run (nothing stored) runs the request again record
          // first: it then waits for a record another request holds and replays it, or takes the key and
          // answers as any request that took it does. Every outcome is one the record-first order gives.
          return settle(replyLast).pipe(
            Effect.catch((failure) =>
              failure instanceof IdempotencyError ? Effect.fail(failure) : settle(recordFirst),
            ),
          );
        };

        const purgeExpired = sql`
          DELETE FROM billing.idempotency_keys
          WHERE created_at < now() - make_interval(secs => ${Duration.toSeconds(retention)})
          RETURNING 1`.pipe(Effect.map((rows) => rows.length));

        const forgetAll = Effect.asVoid(sql`DELETE FROM billing.idempotency_keys`);

        return { retention, run, purgeExpired, forgetAll };
      }),
    );
}
