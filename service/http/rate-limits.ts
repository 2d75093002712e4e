/**
 * How `/v1` shows its request rates (limits/request-limits.ts counts them). Every authenticated answer
 * carries its class's state in the fields of draft-ietf-httpapi-ratelimit-headers-06
 * (https://datatracker.ietf.org/doc/html/draft-ietf-httpapi-ratelimit-headers-06): `RateLimit-Limit`
 * (requests of the class a second, the largest burst too), `RateLimit-Remaining`, `RateLimit-Reset`
 * (seconds until a whole burst is back) and `RateLimit-Policy` (`<limit>;w=1`: that many in a one-second
 * window). The draft's later versions fold them into structured `RateLimit` and `RateLimit-Policy`
 * fields; the separate ones are what clients read today. A refusal is 429 `rate_limited` with
 * `Retry-After` (http/error-response.ts).
 */
import { RateLimited } from "../errors.ts";
import type { RateState, RequestClass } from "../limits/request-limits.ts";

/** The class a route's requests count against: test helpers, reads (GET) or writes (POST, DELETE). */
export const requestClassOf = (route: {
  readonly method: string;
  readonly testOnly?: boolean | undefined;
}): RequestClass => (route.testOnly ? "test_helpers" : route.method === "GET" ? "reads" : "writes");

const CLASS_NAMES: Readonly<Record<RequestClass, string>> = {
  reads: "reads (GET requests)",
  writes: "writes (POST and DELETE requests)",
  test_helpers: "test helper requests",
};

export const rateLimited = (requestClass: RequestClass, limit: number, retryAfterSeconds: number) =>
  new RateLimited({
    code: "rate_limited",
    message: `Too many ${CLASS_NAMES[requestClass]} with this API key: ${limit} a second are allowed. Retry after ${retryAfterSeconds} second${retryAfterSeconds === 1 ? "" : "s"}.`,
    retryAfterSeconds,
  });

const NONE: Readonly<Record<string, string>> = Object.freeze({});

export const rateLimitHeaders = (state: RateState | undefined): Readonly<Record<string, string>> =>
  state === undefined
    ? NONE
    : {
        "RateLimit-Limit": String(state.limit),
        "RateLimit-Remaining": String(state.remaining),
        "RateLimit-Reset": String(state.resetSeconds),
        "RateLimit-Policy": `${state.limit};w=1`,
      };

/** The same fields in the OpenAPI document, for every operation's answers. */
export const RATE_LIMIT_HEADER_DOCS = {
  "RateLimit-Limit": {
    description:
      "Requests of this operation's class (reads, writes, test helpers) a second with this API key",
    schema: { type: "integer" },
  },
  "RateLimit-Remaining": {
    description: "Requests of the class this key can send at once now",
    schema: { type: "integer" },
  },
  "RateLimit-Reset": {
    description: "Seconds until RateLimit-Remaining is back to RateLimit-Limit",
    schema: { type: "integer" },
  },
  "RateLimit-Policy": {
    description: "The limit as a quota of a one-second window, e.g. `25;w=1`",
    schema: { type: "string" },
  },
} as const;
