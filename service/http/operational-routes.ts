/**
 * The routes an operator and a newcomer use, apart from /v1: `/ready` (the API, the indexer and the
 * workers), `/indexer/live` (for the indexer's supervisor), `/metrics` (behind its own token), the
 * OpenAPI document and its reference page.
 *
 * `/metrics` is on the API's port behind its own Bearer token (both sides hashed with SHA-256, then
 * compared in constant time) rather than on a second port: one listener to run and firewall. Without a
 * configured token the route does not exist.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import type { Hono, Context as HonoContext } from "hono";
import { Unauthenticated } from "../errors.ts";
import { registerApiReference } from "./api-reference.ts";
import type { ErrorResponse } from "./error-response.ts";
import { toErrorResponse } from "./error-response.ts";
import { assetCache } from "./hosted-page/assets.ts";
import { precompress, servePrecompressed } from "./precompressed.ts";
import { json } from "./request-id.ts";

export interface Readiness {
  readonly ready: boolean;
  readonly checks: Readonly<Record<string, string>>;
}

export interface MetricsEndpoint {
  /** Called once per answered request, with the route's template (`unmatched` when no route matched). */
  readonly observeRequest: (request: {
    readonly method: string;
    readonly route: string;
    readonly status: number;
    readonly seconds: number;
  }) => void;
  /** The Bearer token `GET /metrics` requires; without one the endpoint does not exist (404). */
  readonly token: string | undefined;
  readonly scrape: () => Promise<{ readonly contentType: string; readonly body: string }>;
}

export interface OperationalOptions {
  readonly readiness: () => Promise<Readiness>;
  /** `GET /indexer/live`: 503 while a chain's indexing is stalled (a process supervisor restarts the indexer). */
  readonly indexerLiveness?: () => Promise<{ readonly stalled: ReadonlyArray<number> }>;
  readonly metrics?: MetricsEndpoint;
  readonly openapi: unknown;
}

/**
 * The paths that load balancers, supervisors and scrapers poll every few seconds: counted in the request
 * metrics like any other, but not written to the request log, where `npm start`'s own indexer supervisor
 * put a line every second.
 */
export const POLLED_PATHS: ReadonlySet<string> = new Set(["/ready", "/indexer/live", "/metrics"]);

/** Constant-time comparison of an Authorization header with `Bearer <token>`. */
const bearerMatches = (header: string | undefined, token: string): boolean =>
  timingSafeEqual(
    createHash("sha256")
      .update(header ?? "")
      .digest(),
    createHash("sha256").update(`Bearer ${token}`).digest(),
  );

export const errorJson = (c: HonoContext, response: ErrorResponse, headers: Record<string, string> = {}) =>
  json(c, response.status, JSON.stringify(response.body), { ...response.headers, ...headers });

// biome-ignore lint/suspicious/noExplicitAny: any Hono env
export const registerOperationalRoutes = (app: Hono<any>, options: OperationalOptions) => {
  app.get("/ready", async (c) => {
    const readiness = await options.readiness();
    return json(
      c,
      readiness.ready ? 200 : 503,
      JSON.stringify({ status: readiness.ready ? "ready" : "starting", ...readiness }),
    );
  });
  const indexerLiveness = options.indexerLiveness;
  if (indexerLiveness)
    app.get("/indexer/live", async (c) => {
      const { stalled } = await indexerLiveness();
      return json(
        c,
        stalled.length === 0 ? 200 : 503,
        JSON.stringify({ live: stalled.length === 0, stalled }),
      );
    });
  const metrics = options.metrics;
  const token = metrics?.token;
  if (metrics && token !== undefined)
    app.get("/metrics", async (c) => {
      if (!bearerMatches(c.req.header("authorization"), token))
        return errorJson(
          c,
          toErrorResponse(
            new Unauthenticated({
              code: "metrics_token_invalid",
              message: "GET /metrics needs `Authorization: Bearer <METRICS_TOKEN>`.",
            }),
          ),
          { "WWW-Authenticate": 'Bearer realm="metrics"' },
        );
      const scraped = await metrics.scrape();
      return c.body(scraped.body, 200, { "content-type": scraped.contentType, "cache-control": "no-store" });
    });
  // Encoded once, started now (the document is small); served as the API reference's bytes are, to any
  // origin (it is public, and /docs reads it from its sandbox's opaque origin).
  const openapi = assetCache(() =>
    precompress(JSON.stringify(options.openapi), "application/json; charset=utf-8"),
  );
  openapi().catch(() => undefined);
  app.get("/v1/openapi.json", async (c) =>
    servePrecompressed(c, await openapi(), {
      "cache-control": "no-cache",
      "access-control-allow-origin": "*",
    }),
  );
  registerApiReference(app, "API reference");
};
