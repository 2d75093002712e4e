/**
 * The error examples of each operation in the OpenAPI document, by status. Where the service has the
 * code that refuses, the example comes from it: the route's own input decoding, its path params' 404,
 * the Idempotency-Key check and the error shape's mapping. The protocol refusals raised inline elsewhere
 * (401, 409, 413, 415) are spelt here; test/e2e/openapi-and-docs.test.ts compares them with the real
 * answers.
 */
import { Effect, Result } from "effect";
import { ERROR_CODES } from "../error-codes.ts";
import { type ApiFailure, HttpRefusal, IdempotencyError, Unauthenticated } from "../errors.ts";
import { validateIdempotencyKey } from "../idempotency/idempotency.ts";
import { perSecondOf, REQUEST_RATE_DEFAULTS } from "../limits/request-limits.ts";
import { MAX_BODY_BYTES } from "./app.ts";
import { type ErrorBody, toErrorResponse } from "./error-response.ts";
import { rateLimited, requestClassOf } from "./rate-limits.ts";
import { decodeInput } from "./request-input.ts";
import type { AnyRoute } from "./route.ts";

export interface ErrorExample {
  readonly summary: string;
  readonly description: string;
  readonly value: ErrorBody;
}

export const PROTOCOL_REFUSALS = {
  apiKeyInvalid: new Unauthenticated({ code: "api_key_invalid", message: "Invalid API key provided." }),
  idempotencyKeyReused: new IdempotencyError({
    status: 409,
    code: "idempotency_key_reused",
    message:
      "This Idempotency-Key was already used with a different request (method, path or body). Use a new key for a new request.",
  }),
  bodyTooLarge: new HttpRefusal({
    status: 413,
    code: "body_too_large",
    message: `Request bodies are limited to ${MAX_BODY_BYTES} bytes.`,
  }),
  unsupportedMediaType: new HttpRefusal({
    status: 415,
    code: "unsupported_media_type",
    message: "Request bodies must be JSON, sent with Content-Type: application/json.",
  }),
} as const;

/**
 * Inputs the route refuses, tried in turn: nothing (a required parameter missing), a page size out of
 * range (list queries), a parameter it does not take.
 */
const REFUSED_INPUTS: ReadonlyArray<Record<string, string>> = [{}, { limit: "1000" }, { colour: "blue" }];

/** The route's own answer to a bad body (POST) or query (GET), from its request decoding. */
const inputRefusal = <R>(route: AnyRoute<R>): ApiFailure | undefined => {
  const what = route.method === "POST" ? "body" : "query";
  for (const input of REFUSED_INPUTS) {
    const decoded = decodeInput(route.body, input, what);
    if (Result.isFailure(decoded)) return decoded.failure;
  }
  return undefined;
};

const examplePath = <R>(route: AnyRoute<R>) =>
  route.path.replace(/\{(\w+)\}/g, (_, name: string) => route.examples.params?.[name] ?? name);

/** Every refusal the operation's examples show. */
export const routeRefusals = <R>(route: AnyRoute<R>): ReadonlyArray<ApiFailure> => {
  const refusals: ApiFailure[] = [PROTOCOL_REFUSALS.apiKeyInvalid];
  const input = inputRefusal(route);
  if (input) refusals.push(input);
  if (route.method === "POST")
    refusals.push(
      Effect.runSync(Effect.flip(validateIdempotencyKey(undefined))),
      PROTOCOL_REFUSALS.idempotencyKeyReused,
      PROTOCOL_REFUSALS.bodyTooLarge,
      PROTOCOL_REFUSALS.unsupportedMediaType,
    );
  for (const [name, param] of Object.entries(route.params ?? {})) {
    const value = route.examples.params?.[name];
    if (value !== undefined) refusals.push(param.notFound(value));
  }
  if (route.testOnly)
    refusals.push(
      new HttpRefusal({
        status: 404,
        code: "route_not_found",
        message: `Unrecognized request URL (${route.method}: ${examplePath(route)}).`,
      }),
    );
  // As a test key's default rate would answer it.
  const requestClass = requestClassOf(route);
  refusals.push(rateLimited(requestClass, perSecondOf(REQUEST_RATE_DEFAULTS, false, requestClass), 1));
  refusals.push(...(route.examples.errors ?? []));
  return refusals;
};

/** `{ status: { name: example } }` for the operation's error responses; names are the codes. */
export const errorExamples = <R>(route: AnyRoute<R>): Record<string, Record<string, ErrorExample>> => {
  const byStatus: Record<string, Record<string, ErrorExample>> = {};
  for (const refusal of routeRefusals(route)) {
    const { status, body } = toErrorResponse(refusal);
    const examples = byStatus[String(status)] ?? {};
    byStatus[String(status)] = examples;
    const code = body.error.code;
    const name = code in examples ? `${code}_${Object.keys(examples).length + 1}` : code;
    examples[name] = {
      summary: code,
      description: ERROR_CODES[refusal.code].when,
      value: body,
    };
  }
  return byStatus;
};
