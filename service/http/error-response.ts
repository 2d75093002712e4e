/**
 * One error body everywhere: `{"error":{"type","code","message","param"}}`. Domain code fails with tagged
 * errors (errors.ts), each mapped here to a status and a `type`; defects and database errors become a
 * logged 500 `api_error` naming the request id.
 */
import { Schema } from "effect";
import type { ErrorCode } from "../error-codes.ts";
import type { ApiFailure } from "../errors.ts";

export type ErrorType = "invalid_request_error" | "authentication_error" | "idempotency_error" | "api_error";

export const ErrorBody = Schema.Struct({
  error: Schema.Struct({
    type: Schema.Literals([
      "invalid_request_error",
      "authentication_error",
      "idempotency_error",
      "api_error",
    ]),
    code: Schema.String,
    message: Schema.String,
    param: Schema.NullOr(Schema.String),
  }),
}).annotate({ identifier: "Error" });
export type ErrorBody = typeof ErrorBody.Type;

export interface ErrorResponse {
  readonly status: number;
  readonly body: ErrorBody;
  readonly headers?: Readonly<Record<string, string>>;
}

const make = (
  status: number,
  type: ErrorType,
  code: ErrorCode,
  message: string,
  param: string | null = null,
) => ({
  status,
  body: { error: { type, code, message, param } },
});

export const toErrorResponse = (failure: ApiFailure): ErrorResponse => {
  switch (failure._tag) {
    case "InvalidRequest":
      return make(400, "invalid_request_error", failure.code, failure.message, failure.param);
    case "Unauthenticated":
      return make(401, "authentication_error", failure.code, failure.message);
    case "NotFound":
      return make(404, "invalid_request_error", failure.code, failure.message, failure.param);
    case "IdempotencyError":
      return make(failure.status, "idempotency_error", failure.code, failure.message);
    case "HttpRefusal":
      return make(failure.status, "invalid_request_error", failure.code, failure.message);
    case "Unavailable":
      return failure.retryAfterSeconds === undefined
        ? make(503, "api_error", failure.code, failure.message)
        : {
            ...make(503, "api_error", failure.code, failure.message),
            headers: { "Retry-After": String(Math.max(1, failure.retryAfterSeconds)) },
          };
    case "RateLimited":
      return {
        ...make(429, "invalid_request_error", failure.code, failure.message),
        headers: { "Retry-After": String(Math.max(1, failure.retryAfterSeconds)) },
      };
  }
};

export const internalError = (requestId: string): ErrorResponse =>
  make(
    500,
    "api_error",
    "internal_error",
    `Something went wrong on our side. Retrying with the same Idempotency-Key is safe. Request id: ${requestId}`,
  );
