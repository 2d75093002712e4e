/**
 * A route is data: method, path, schemas and a handler. The same definition registers the Hono
 * handler, validates the request and generates the OpenAPI document, so the docs cannot drift.
 */
import type { Effect, Schema } from "effect";
import type { SqlError } from "effect/sql";
import type { Caller } from "../auth/api-keys.ts";
import type { ApiFailure } from "../errors.ts";

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
  /** Status of a successful response (default 200). */
  readonly status?: 200 | 201;
  readonly handler: (context: RouteContext<B>) => Effect.Effect<unknown, ApiFailure | SqlError.SqlError, R>;
  /** Another representation than JSON for some results (e.g. CSV exports). */
  readonly render?: (value: unknown) => { readonly contentType: string; readonly body: string } | undefined;
}

// biome-ignore lint/suspicious/noExplicitAny: a heterogeneous route table needs an existential body type
export type AnyRoute<R> = Route<any, R>;

export const defineRoute = <B, R>(route: Route<B, R>): Route<B, R> => route;

export const toHonoPath = (path: string): string => path.replace(/\{(\w+)\}/g, ":$1");
