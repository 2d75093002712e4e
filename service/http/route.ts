/**
 * A route is data: method, path, schemas and a handler. The same definition registers the Hono
 * handler, validates the request and generates the OpenAPI document, so the docs cannot drift.
 */
import type { Effect, Schema } from "effect";
import type { SqlError } from "effect/sql";
import type { Caller } from "../auth/api-keys.ts";
import type { ApiFailure, NotFound } from "../errors.ts";
import type { PathParam } from "./input-guard.ts";

export interface RouteContext<B> {
  readonly caller: Caller;
  readonly body: B;
  readonly params: Readonly<Record<string, string>>;
  readonly query: URLSearchParams;
}

export interface Route<B, R> {
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
  readonly response: Schema.Top;
  /**
   * Every `{param}` of the path and what it must look like; anything else gets the route's own 404
   * before the handler runs (so no malformed id reaches Postgres).
   */
  readonly params?: Readonly<Record<string, PathParam<NotFound>>>;
  /** Test-mode helpers: a live key gets 404 `route_not_found`, as if the route did not exist. */
  readonly testOnly?: boolean;
  /** Status of a successful response (default 200). */
  readonly status?: 200 | 201;
  readonly handler: (context: RouteContext<B>) => Effect.Effect<unknown, ApiFailure | SqlError.SqlError, R>;
  /** Another representation than JSON for some results (e.g. CSV exports). */
  readonly render?: (value: unknown) => { readonly contentType: string; readonly body: string } | undefined;
}

// biome-ignore lint/suspicious/noExplicitAny: a heterogeneous route table needs an existential body type
export type AnyRoute<R> = Route<any, R>;

/**
 * A route of the hosted authorization page's own API: no API key (the unguessable link is the
 * credential) and no Idempotency-Key (its writes are idempotent by nature); same body decoding and
 * error shape as /v1.
 */
export interface PublicRoute<B, R> {
  readonly method: "GET" | "POST";
  readonly path: string;
  readonly body?: Schema.Codec<B, unknown>;
  /** As Route.params. */
  readonly params?: Readonly<Record<string, PathParam<NotFound>>>;
  readonly handler: (context: {
    readonly body: B;
    readonly params: Readonly<Record<string, string>>;
  }) => Effect.Effect<unknown, ApiFailure | SqlError.SqlError, R>;
}

// biome-ignore lint/suspicious/noExplicitAny: as AnyRoute
export type AnyPublicRoute<R> = PublicRoute<any, R>;

export const definePublicRoute = <B, R>(route: PublicRoute<B, R>): PublicRoute<B, R> => route;

export const defineRoute = <B, R>(route: Route<B, R>): Route<B, R> => route;

export const toHonoPath = (path: string): string => path.replace(/\{(\w+)\}/g, ":$1");
