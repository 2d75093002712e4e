/**
 * A route is data: method, path, schemas and a handler. The same definition registers the Hono
 * handler, validates the request, encodes the response (a handler's value that does not match its
 * response schema is a 500, never a silent drift) and generates the OpenAPI document.
 */
import type { Effect, Schema } from "effect";
import type { SqlError } from "effect/sql";
import type { Caller } from "../auth/api-keys.ts";
import type { Download } from "../downloads.ts";
import type { ApiFailure, NotFound } from "../errors.ts";
import type { PathParam } from "./input-guard.ts";

/**
 * What the API reference shows for an operation (the values live in `examples/`). The OpenAPI document
 * carries them, encoded with the route's own schemas, and test/unit/openapi-examples.test.ts decodes each
 * with those schemas, so an example cannot drift from what the route takes and answers.
 */
export interface RouteExamples<B, S extends Schema.Top> {
  /** A value for each `{param}` of the path. */
  readonly params?: Readonly<Record<string, string>>;
  /** The JSON body of a POST that takes one. */
  readonly request?: NoInfer<B>;
  /** The success response, as the handler returns it. */
  readonly response: NoInfer<S["Type"]>;
  /** Refusals particular to this operation (the protocol's own are added to every operation). */
  readonly errors?: ReadonlyArray<ApiFailure>;
}

export interface RouteContext<B> {
  readonly caller: Caller;
  readonly body: B;
  readonly params: Readonly<Record<string, string>>;
}

export interface Route<B, S extends Schema.Top, R> {
  readonly method: "GET" | "POST" | "DELETE";
  /** OpenAPI-style path, e.g. `/v1/mandates/{id}`. */
  readonly path: string;
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  readonly tag: string;
  /**
   * The request's input, decoded with unknown keys rejected: the JSON body of a POST (omitted: the body
   * must be empty or `{}`), the query string of a GET (omitted: no query parameters).
   */
  readonly body?: Schema.Codec<B, unknown>;
  /** The success response: the handler's value is encoded with it before it is sent. */
  readonly response: S;
  /**
   * Every `{param}` of the path and what it must look like; anything else gets the route's own 404
   * before the handler runs (so no malformed id reaches Postgres).
   */
  readonly params?: Readonly<Record<string, PathParam<NotFound>>>;
  /** Test-mode helpers: a live key gets 404 `route_not_found`, as if the route did not exist. */
  readonly testOnly?: boolean;
  /** Status of a successful response (default 200). */
  readonly status?: 200 | 201;
  /**
   * A POST whose handler's every effect is a write in the request's transaction (no chain transaction,
   * nothing written outside it): its Idempotency-Key record is written once, with the reply
   * (idempotency/idempotency.ts, `transactional`).
   */
  readonly transactional?: boolean;
  /**
   * A POST idempotent by its content (x402's verify reads; its settle is keyed by the authorization's
   * nonce), called by clients that send no Idempotency-Key: none is asked for. One sent is used as on
   * any POST.
   */
  readonly idempotentByContent?: boolean;
  readonly handler: (context: RouteContext<B>) => Effect.Effect<S["Type"], ApiFailure | SqlError.SqlError, R>;
  readonly examples: RouteExamples<B, S>;
  /**
   * A GET that some requests turn into a download (a CSV or JSON export of any length, streamed in
   * pages); undefined: the JSON response.
   */
  readonly download?: (
    context: RouteContext<B>,
  ) => Effect.Effect<Download<R> | undefined, ApiFailure | SqlError.SqlError, R>;
}

// biome-ignore lint/suspicious/noExplicitAny: a heterogeneous route table needs existential body and response types
export type AnyRoute<R> = Route<any, any, R>;

/**
 * A route of the hosted authorization page's own API: no API key (the unguessable link is the
 * credential) and no Idempotency-Key (its writes are idempotent by nature); same body decoding, response
 * encoding and error shape as /v1.
 */
export interface PublicRoute<B, S extends Schema.Top, R> {
  readonly method: "GET" | "POST";
  readonly path: string;
  readonly body?: Schema.Codec<B, unknown>;
  readonly response: S;
  /** As Route.params. */
  readonly params?: Readonly<Record<string, PathParam<NotFound>>>;
  readonly handler: (context: {
    readonly body: B;
    readonly params: Readonly<Record<string, string>>;
  }) => Effect.Effect<S["Type"], ApiFailure | SqlError.SqlError, R>;
}

// biome-ignore lint/suspicious/noExplicitAny: as AnyRoute
export type AnyPublicRoute<R> = PublicRoute<any, any, R>;

export const definePublicRoute = <B, S extends Schema.Top, R>(
  route: PublicRoute<B, S, R>,
): PublicRoute<B, S, R> => route;

export const defineRoute = <B, S extends Schema.Top, R>(route: Route<B, S, R>): Route<B, S, R> => route;

export const toHonoPath = (path: string): string => path.replace(/\{(\w+)\}/g, ":$1");
