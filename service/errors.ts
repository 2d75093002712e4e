/**
 * The errors a caller can cause. Each maps to one HTTP status and one `type` of the error body
 * `{"error":{"type","code","message","param"}}`; the mapping lives in http/error-response.ts.
 */
import { Schema } from "effect";
import { ERROR_CODE_LIST, type ErrorCode } from "./error-codes.ts";

/** An error code of the catalogue (error-codes.ts). */
const Code = Schema.Literals(ERROR_CODE_LIST);

const fields = { code: Code, message: Schema.String, param: Schema.NullOr(Schema.String) };

/** 400: the request is malformed or a parameter is invalid. */
export class InvalidRequest extends Schema.TaggedError<InvalidRequest>()("InvalidRequest", fields) {}

/** 401: no usable API key. */
export class Unauthenticated extends Schema.TaggedError<Unauthenticated>()("Unauthenticated", {
  code: Code,
  message: Schema.String,
}) {}

/** 404: the object does not exist for this API key (another merchant's objects do not exist either). */
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields) {}

/** 409 (or 400 when the key is missing): misuse of Idempotency-Key. */
export class IdempotencyError extends Schema.TaggedError<IdempotencyError>()("IdempotencyError", {
  status: Schema.Literals([400, 409]),
  code: Code,
  message: Schema.String,
}) {}

/** Protocol-level refusals raised by the HTTP layer before any handler runs. */
export class HttpRefusal extends Schema.TaggedError<HttpRefusal>()("HttpRefusal", {
  status: Schema.Literals([403, 404, 405, 413, 415]),
  code: Code,
  message: Schema.String,
}) {}

/**
 * 503: a dependency (a chain's RPC, the relayer's budget) cannot serve the request now; nothing was
 * changed and a retry is safe, after `retryAfterSeconds` when the service knows when (`Retry-After`).
 */
export class Unavailable extends Schema.TaggedError<Unavailable>()("Unavailable", {
  code: Code,
  message: Schema.String,
  retryAfterSeconds: Schema.optionalKey(Schema.Int),
}) {}

/** 429: too many requests (the public authorization page's limits); retry after `retryAfterSeconds`. */
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  code: Code,
  message: Schema.String,
  retryAfterSeconds: Schema.Int,
}) {}

export type ApiFailure =
  | InvalidRequest
  | Unauthenticated
  | NotFound
  | IdempotencyError
  | HttpRefusal
  | Unavailable
  | RateLimited;

/** 404 for an id the caller's merchant and mode have no object of (another merchant's included). */
export const resourceMissing = (noun: string, id: string, param: string | null = "id") =>
  new NotFound({ code: "resource_missing", message: `No such ${noun}: '${id.slice(0, 80)}'`, param });

export const invalidParam = (param: string, message: string, code: ErrorCode = "parameter_invalid") =>
  new InvalidRequest({ code, message, param });

const API_FAILURE_TAGS: ReadonlySet<string> = new Set([
  "InvalidRequest",
  "Unauthenticated",
  "NotFound",
  "IdempotencyError",
  "HttpRefusal",
  "Unavailable",
  "RateLimited",
]);

export const isApiFailure = (error: { readonly _tag: string }): error is ApiFailure =>
  API_FAILURE_TAGS.has(error._tag);
