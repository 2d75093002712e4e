/**
 * The HTTP layer: thin. It authenticates, enforces the protocol rules (JSON only, size limit,
 * Idempotency-Key on POST), decodes the body with the route's schema, runs the route's Effect and
 * renders the one error shape. Everything else lives in the capability modules.
 */
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { Cause, Effect, Exit, Result, Schema } from "effect";
import { Hono, type Context as HonoContext } from "hono";
import { bodyLimit } from "hono/body-limit";
import { methodNotAllowed } from "hono/method-not-allowed";
import { matchedRoutes } from "hono/route";
import { ApiKeys, type Caller } from "../auth/api-keys.ts";
import {
  type ApiFailure,
  HttpRefusal,
  InvalidRequest,
  isApiFailure,
  type NotFound,
  Unauthenticated,
} from "../errors.ts";
import { Idempotency, validateIdempotencyKey } from "../idempotency/idempotency.ts";
import { schemaErrorIssues } from "../schema-errors.ts";
import { type ErrorResponse, internalError, toErrorResponse } from "./error-response.ts";
import {
  describeProblem,
  findInputProblem,
  type PathParam,
  printable,
  stringProblem,
} from "./input-guard.ts";
import { type AnyPublicRoute, type AnyRoute, toHonoPath } from "./route.ts";

export const MAX_BODY_BYTES = 64 * 1024;

/** Runs an Effect on the service runtime; failures include the runtime's own (e.g. its layer failing). */
export type Runner<R> = <A, E>(effect: Effect.Effect<A, E, R>) => Promise<Exit.Exit<A, unknown>>;

export interface Readiness {
  readonly ready: boolean;
  readonly checks: Readonly<Record<string, string>>;
}

export interface AppOptions<R> {
  readonly routes: ReadonlyArray<AnyRoute<R>>;
  readonly publicRoutes?: ReadonlyArray<AnyPublicRoute<R>>;
  /** Registers extra non-JSON routes (the hosted authorization page and its assets). */
  readonly extend?: (app: Hono<Env>) => void;
  readonly run: Runner<R | ApiKeys | Idempotency>;
  /** Checked before every request under `/authorize/` (the public page): a refusal to render, if any. */
  readonly limitPage?: (c: HonoContext<Env>) => Promise<ApiFailure | undefined>;
  readonly readiness: () => Promise<Readiness>;
  /** `GET /indexer/live`: 503 while a chain's indexing is stalled (a process supervisor restarts the indexer). */
  readonly indexerLiveness?: () => Promise<{ readonly stalled: ReadonlyArray<number> }>;
  readonly metrics?: MetricsEndpoint;
  readonly openapi: unknown;
  readonly docsPage: string;
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

/** The template of the route that answered (`/v1/mandates/:id`), never the raw path: bounded labels. */
const routeTemplate = (c: HonoContext<Env>): string =>
  matchedRoutes(c).findLast((route) => route.method !== "ALL")?.path ?? "unmatched";

/** Constant-time comparison of an Authorization header with `Bearer <token>`. */
const bearerMatches = (header: string | undefined, token: string): boolean =>
  timingSafeEqual(
    createHash("sha256")
      .update(header ?? "")
      .digest(),
    createHash("sha256").update(`Bearer ${token}`).digest(),
  );

export type Env = { Variables: { requestId: string; merchantId?: string } };

const json = (c: HonoContext<Env>, status: number, bodyText: string, headers: Record<string, string> = {}) =>
  c.body(bodyText, status as 200, { "content-type": "application/json; charset=utf-8", ...headers });

const errorJson = (c: HonoContext<Env>, response: ErrorResponse, headers: Record<string, string> = {}) =>
  json(c, response.status, JSON.stringify(response.body), headers);

const newRequestId = () => `req_${randomBytes(12).toString("base64url")}`;

const bodyFailure = (issue: ReturnType<typeof schemaErrorIssues>[number]): InvalidRequest => {
  if (issue.kind === "missing")
    return new InvalidRequest({
      code: "parameter_missing",
      message: `Missing required param: ${issue.param}.`,
      param: issue.param,
    });
  if (issue.kind === "unknown")
    return new InvalidRequest({
      code: "parameter_unknown",
      message: `Received unknown parameter: ${issue.param}.`,
      param: issue.param,
    });
  return new InvalidRequest({
    code: "parameter_invalid",
    message: `Invalid ${issue.param === "" ? "request body" : issue.param}: ${issue.message}.`,
    param: issue.param === "" ? null : issue.param,
  });
};

/** Reads and decodes a JSON body. Empty means `{}`. */
const readBody = async (c: HonoContext<Env>, schema: Schema.Codec<unknown, unknown> | undefined) => {
  const text = await c.req.text();
  const contentType = c.req.header("content-type");
  if (text.length > 0 && !(contentType && /^application\/json\s*(;|$)/i.test(contentType)))
    return Result.fail<ApiFailure>(
      new HttpRefusal({
        status: 415,
        code: "unsupported_media_type",
        message: "Request bodies must be JSON, sent with Content-Type: application/json.",
      }),
    );
  let parsed: unknown = {};
  if (text.trim().length > 0) {
    try {
      parsed = JSON.parse(text);
    } catch {
      return Result.fail<ApiFailure>(
        new InvalidRequest({
          code: "invalid_json",
          message: "The request body is not valid JSON.",
          param: null,
        }),
      );
    }
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
    return Result.fail<ApiFailure>(
      new InvalidRequest({
        code: "invalid_body",
        message: "The request body must be a JSON object.",
        param: null,
      }),
    );
  return Result.map(decodeInput(schema, parsed, "body"), (value) => ({ raw: parsed, value }));
};

/** Decodes a request's input (body or query) with the route's schema; unknown keys are refused. */
const decodeInput = (
  schema: Schema.Codec<unknown, unknown> | undefined,
  input: unknown,
  what: "body" | "query",
): Result.Result<unknown, ApiFailure> => {
  const unsafe = findInputProblem(input);
  if (unsafe)
    return Result.fail(
      new InvalidRequest({
        code: "parameter_invalid",
        message: `Invalid ${unsafe.param === "" ? what : unsafe.param}: ${describeProblem(unsafe.problem)}.`,
        param: unsafe.param === "" ? null : unsafe.param,
      }),
    );
  const decoded = Schema.decodeUnknownResult(schema ?? Schema.Struct({}))(input, {
    onExcessProperty: "error",
    errors: "all",
  });
  if (Result.isSuccess(decoded)) return Result.succeed(decoded.success);
  const [first] = schemaErrorIssues(decoded.failure);
  return Result.fail(
    first
      ? bodyFailure(first)
      : new InvalidRequest({ code: "parameter_invalid", message: `Invalid ${what}.`, param: null }),
  );
};

/**
 * The path's params, or the route's own 404 for one that can't name anything (a malformed id never
 * reaches a query). A param the route did not declare must at least be a storable string.
 */
const decodeParams = (
  c: HonoContext<Env>,
  declared: Readonly<Record<string, PathParam<NotFound>>> | undefined,
): Result.Result<Record<string, string>, ApiFailure> => {
  const params = c.req.param() as Record<string, string>;
  for (const [name, value] of Object.entries(params)) {
    const expected = declared?.[name];
    if (expected ? !expected.pattern.test(value) : stringProblem(value, 255) !== undefined)
      return Result.fail(
        expected
          ? expected.notFound(printable(value))
          : new HttpRefusal({
              status: 404,
              code: "route_not_found",
              message: `Unrecognized request URL (${c.req.method}: ${printable(c.req.path, 300)}).`,
            }),
      );
  }
  return Result.succeed(params);
};

export const makeApp = <R>(options: AppOptions<R>): Hono<Env> => {
  const app = new Hono<Env>();
  const { run } = options;

  const respondFailure = (c: HonoContext<Env>, failure: ApiFailure, headers: Record<string, string> = {}) => {
    const response = toErrorResponse(failure);
    return errorJson(c, response, { ...response.headers, ...headers });
  };

  const respondDefect = async (c: HonoContext<Env>, cause: Cause.Cause<unknown>) => {
    await run(
      Effect.logError("request failed", cause).pipe(Effect.annotateLogs({ request_id: c.get("requestId") })),
    );
    return errorJson(c, internalError(c.get("requestId")));
  };

  const respondExit = <A>(
    c: HonoContext<Env>,
    exit: Exit.Exit<A, unknown>,
    onSuccess: (value: A) => Response,
  ) => {
    if (Exit.isSuccess(exit)) return onSuccess(exit.value);
    const failure = Cause.findErrorOption(exit.cause);
    if (failure._tag === "Some" && isTagged(failure.value) && isApiFailure(failure.value))
      return respondFailure(c, failure.value);
    return respondDefect(c, exit.cause);
  };

  app.use(async (c, next) => {
    const started = performance.now();
    c.set("requestId", newRequestId());
    c.header("Request-Id", c.get("requestId"));
    await next();
    const elapsedMs = performance.now() - started;
    options.metrics?.observeRequest({
      method: c.req.method,
      route: routeTemplate(c),
      status: c.res.status,
      seconds: elapsedMs / 1000,
    });
    const entry = {
      request_id: c.get("requestId"),
      method: c.req.method,
      path: c.req.path,
      status: c.res.status,
      duration_ms: Math.round(elapsedMs * 10) / 10,
      ...(c.get("merchantId") ? { merchant: c.get("merchantId") } : {}),
    };
    await run(Effect.logInfo("request").pipe(Effect.annotateLogs(entry)));
  });
  app.use(
    methodNotAllowed({
      app,
      onMethodNotAllowed: (c, methods) =>
        respondFailure(
          c,
          new HttpRefusal({
            status: 405,
            code: "method_not_allowed",
            message: `${c.req.method} is not allowed on ${c.req.path}. Allowed: ${methods.join(", ")}.`,
          }),
          { Allow: methods.join(", ") },
        ),
    }),
  );
  app.use(
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: (c) =>
        respondFailure(
          c as HonoContext<Env>,
          new HttpRefusal({
            status: 413,
            code: "body_too_large",
            message: `Request bodies are limited to ${MAX_BODY_BYTES} bytes.`,
          }),
        ),
    }),
  );

  const limitPage = options.limitPage;
  if (limitPage)
    app.use("/authorize/*", async (c, next) => {
      const refusal = await limitPage(c);
      if (refusal) return respondFailure(c, refusal);
      await next();
    });

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
  const metricsToken = metrics?.token;
  if (metrics && metricsToken !== undefined)
    app.get("/metrics", async (c) => {
      if (!bearerMatches(c.req.header("authorization"), metricsToken))
        return respondFailure(
          c,
          new Unauthenticated({
            code: "metrics_token_invalid",
            message: "GET /metrics needs `Authorization: Bearer <METRICS_TOKEN>`.",
          }),
          { "WWW-Authenticate": 'Bearer realm="metrics"' },
        );
      const scraped = await metrics.scrape();
      return c.body(scraped.body, 200, { "content-type": scraped.contentType, "cache-control": "no-store" });
    });
  app.get("/v1/openapi.json", (c) => json(c, 200, JSON.stringify(options.openapi)));
  app.get("/docs", (c) => c.html(options.docsPage));

  for (const route of options.routes) {
    const handler = async (c: HonoContext<Env>) => {
      const authenticated = await run(
        Effect.gen(function* () {
          const keys = yield* ApiKeys;
          return yield* keys.authenticate(c.req.header("authorization"));
        }),
      );
      if (Exit.isFailure(authenticated)) return respondExit(c, authenticated, () => c.res);
      const caller: Caller = authenticated.value;
      c.set("merchantId", caller.merchantId);
      if (route.testOnly && caller.livemode) return notFound(c);

      const decodedParams = decodeParams(c, route.params);
      if (Result.isFailure(decodedParams)) return respondFailure(c, decodedParams.failure);
      const params = decodedParams.success;
      const query = new URL(c.req.url).searchParams;
      const status = route.status ?? 200;

      if (route.method !== "POST") {
        const input = decodeInput(route.body, Object.fromEntries(query), "query");
        if (Result.isFailure(input)) return respondFailure(c, input.failure);
        const exit = await run(route.handler({ caller, body: input.success, params, query }));
        return respondExit(c, exit, (value) => {
          const rendered = route.render?.(value);
          return rendered
            ? c.body(rendered.body, status, { "content-type": rendered.contentType })
            : json(c, status, JSON.stringify(value));
        });
      }

      const key = Effect.runSync(Effect.result(validateIdempotencyKey(c.req.header("idempotency-key"))));
      if (Result.isFailure(key)) return respondFailure(c, key.failure);
      const body = await readBody(c, route.body);
      if (Result.isFailure(body)) return respondFailure(c, body.failure);

      const exit = await run(
        Effect.gen(function* () {
          const idempotency = yield* Idempotency;
          return yield* idempotency.run(
            caller,
            { key: key.success, method: route.method, path: c.req.path, body: body.success.raw },
            Effect.map(route.handler({ caller, body: body.success.value, params, query }), (value) => ({
              status,
              body: value,
            })),
          );
        }),
      );
      return respondExit(c, exit, (stored) =>
        json(c, stored.status, stored.bodyText, stored.replayed ? { "Idempotent-Replayed": "true" } : {}),
      );
    };
    app.on(route.method, toHonoPath(route.path), handler);
  }

  for (const route of options.publicRoutes ?? []) {
    app.on(route.method, toHonoPath(route.path), async (c) => {
      const decodedParams = decodeParams(c, route.params);
      if (Result.isFailure(decodedParams)) return respondFailure(c, decodedParams.failure);
      const params = decodedParams.success;
      const input =
        route.method === "POST"
          ? await readBody(c, route.body)
          : Result.map(
              decodeInput(route.body, Object.fromEntries(new URL(c.req.url).searchParams), "query"),
              (value) => ({
                raw: value,
                value,
              }),
            );
      if (Result.isFailure(input)) return respondFailure(c, input.failure);
      const exit = await run(route.handler({ body: input.success.value, params }));
      return respondExit(c, exit, (value) =>
        json(c, 200, JSON.stringify(value), { "cache-control": "no-store" }),
      );
    });
  }
  options.extend?.(app);

  const notFound = (c: HonoContext<Env>) =>
    respondFailure(
      c,
      new HttpRefusal({
        status: 404,
        code: "route_not_found",
        message: `Unrecognized request URL (${c.req.method}: ${c.req.path}).`,
      }),
    );
  app.notFound(notFound);
  app.onError(async (error, c) => respondDefect(c, Cause.die(error)));
  return app;
};

const isTagged = (value: unknown): value is { readonly _tag: string } =>
  typeof value === "object" && value !== null && typeof (value as { _tag?: unknown })._tag === "string";
