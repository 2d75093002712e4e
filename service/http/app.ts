/**
 * The HTTP layer: thin. It authenticates, enforces the protocol rules (JSON only, size limit,
 * Idempotency-Key on POST), decodes the input with the route's schema, runs the route's Effect, encodes
 * its value with the response schema and renders the one error shape. Everything else lives in the
 * capability modules.
 *
 * Every path must fit Hono's RegExpRouter (one regular expression for all routes): no static segment
 * beside a parameter at the same place, which would make Hono fall back to its slower trie router on
 * every request. The hosted pages' assets live under `/assets/` for that reason, and
 * `/v1/gas_cost_totals` is a path of its own rather than a static segment beside `/v1/gas_costs/{id}`
 * (test/unit/http-router.test.ts).
 */
import { Cause, Effect, Exit, LogLevel, Result, Schema } from "effect";
import { Hono, type Context as HonoContext } from "hono";
import { bodyLimit } from "hono/body-limit";
import { methodNotAllowed } from "hono/method-not-allowed";
import { matchedRoutes } from "hono/route";
import type { ApiKeys, Caller } from "../auth/api-keys.ts";
import type { ConsoleSessions } from "../auth/console-sessions.ts";
import { compileConforms } from "../compiled-schema.ts";
import type { Download } from "../downloads.ts";
import { type ApiFailure, HttpRefusal, isApiFailure } from "../errors.ts";
import { Idempotency, validateIdempotencyKey } from "../idempotency/idempotency.ts";
import type { Admission, RateState, RequestClass } from "../limits/request-limits.ts";
import { authenticateRequest, consoleCookie, registerConsoleSessionRoutes } from "./console-session.ts";
import { internalError, toErrorResponse } from "./error-response.ts";
import {
  errorJson,
  type OperationalOptions,
  POLLED_PATHS,
  registerOperationalRoutes,
} from "./operational-routes.ts";
import { rateLimited, rateLimitHeaders, requestClassOf } from "./rate-limits.ts";
import { json, newRequestId, stampRequestId } from "./request-id.ts";
import { decodeParams, decodeQuery, readBody } from "./request-input.ts";
import { type AnyPublicRoute, type AnyRoute, toHonoPath } from "./route.ts";

export type { MetricsEndpoint, Readiness } from "./operational-routes.ts";

export const MAX_BODY_BYTES = 64 * 1024;

/** Runs an Effect on the service runtime; failures include the runtime's own (e.g. its layer failing). */
export type Runner<R> = <A, E>(effect: Effect.Effect<A, E, R>) => Promise<Exit.Exit<A, unknown>>;

export interface AppOptions<R> extends OperationalOptions {
  readonly routes: ReadonlyArray<AnyRoute<R>>;
  readonly publicRoutes?: ReadonlyArray<AnyPublicRoute<R>>;
  /** Registers extra non-JSON routes (the hosted pages and their assets). */
  readonly extend?: (app: Hono<Env>) => void;
  readonly run: Runner<R | ApiKeys | ConsoleSessions | Idempotency>;
  /** The service's public URL: behind a proxy that ends TLS, an https one keeps the console's cookie `__Host-`. */
  readonly publicUrl?: string;
  /**
   * Checked before every request that needs no API key: the public pages (under `/authorize/`, `/pay/`,
   * `/portal/`, `/assets/`) and the console's page, assets and sign-in (`/console/*`, which Hono also
   * matches to `/console`). Answers the refusal, if any.
   */
  readonly limitPage?: (c: HonoContext<Env>) => Promise<ApiFailure | undefined>;
  /**
   * Counts every authenticated `/v1` request against its API key's rate for the route's class
   * (limits/request-limits.ts): the class's state for the `RateLimit-*` headers, and whether it is refused.
   */
  readonly limitRequest?: (
    caller: Caller,
    requestClass: RequestClass,
  ) => Effect.Effect<Admission | undefined>;
}

export type Env = { Variables: { requestId: string; merchantId?: string; rateLimit?: RateState } };

/** The template of the route that answered (`/v1/mandates/:id`), never the raw path: bounded labels. */
const routeTemplate = (c: HonoContext<Env>): string =>
  matchedRoutes(c).findLast((route) => route.method !== "ALL")?.path ?? "unmatched";

const isTagged = (value: unknown): value is { readonly _tag: string } =>
  typeof value === "object" && value !== null && typeof (value as { _tag?: unknown })._tag === "string";

/**
 * The response body: the value encoded with the route's schema, excess keys refused. A value that does
 * not match what the route documents is our bug: a defect, answered 500 and logged.
 */
const bodyEncoder = (schema: Schema.Top): ((value: unknown) => Effect.Effect<string>) => {
  // Built once per route, not per request; Schema answers whatever the compiled fast path passes over.
  const encode = Schema.encodeUnknownEffect(schema as Schema.Codec<unknown, unknown>);
  const conforms = compileConforms(schema, { keyOrder: true });
  return (value) =>
    conforms?.(value)
      ? Effect.succeed(JSON.stringify(value))
      : encode(value, { onExcessProperty: "error" }).pipe(
          Effect.map((encoded) => JSON.stringify(encoded)),
          Effect.orDie,
        );
};

/** A failure the caller caused (4xx) as a stored and replayed reply; undefined for ours (5xx). */
const storableFailure = (failure: unknown) => {
  if (!isTagged(failure) || !isApiFailure(failure)) return undefined;
  const response = toErrorResponse(failure);
  return response.status < 500
    ? { status: response.status, bodyText: JSON.stringify(response.body) }
    : undefined;
};

export const makeApp = <R>(options: AppOptions<R>): Hono<Env> => {
  const app = new Hono<Env>();
  const { run } = options;

  const respondFailure = (c: HonoContext<Env>, failure: ApiFailure, headers: Record<string, string> = {}) =>
    errorJson(c, toErrorResponse(failure), { ...rateLimitHeaders(c.get("rateLimit")), ...headers });

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

  /**
   * A download's response: each chunk is asked for as the client reads the one before (pull), so a slow
   * reader holds one chunk, not the export. A failure midway ends the transfer without its last chunk.
   */
  const streamDownload = (c: HonoContext<Env>, download: Download<R>, first: string | undefined) => {
    const encoder = new TextEncoder();
    let pending = first;
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        if (pending === undefined) return controller.close();
        controller.enqueue(encoder.encode(pending));
        const exit = await run(download.next);
        if (Exit.isSuccess(exit)) pending = exit.value;
        else {
          await run(Effect.logError("download failed midway", exit.cause));
          controller.error(new Error("download failed"));
        }
      },
    });
    return new Response(body, {
      status: 200,
      headers: {
        "content-type": download.contentType,
        "content-disposition": `attachment; filename="${download.filename}"`,
        "cache-control": "no-store",
        ...rateLimitHeaders(c.get("rateLimit")),
      },
    });
  };

  const routeNotFound = (c: HonoContext<Env>) =>
    new HttpRefusal({
      status: 404,
      code: "route_not_found",
      message: `Unrecognized request URL (${c.req.method}: ${c.req.path}).`,
    });
  const notFound = (c: HonoContext<Env>) => respondFailure(c, routeNotFound(c));
  // Before the body, the idempotency record and the handler: a restricted key changes nothing.
  const restrictedKeyRefusal = new HttpRefusal({
    status: 403,
    code: "api_key_restricted",
    message:
      "This API key is restricted (rk_…): it can read everything and change nothing. Use a secret key (sk_…) to make this request.",
  });

  // Whether the runtime logs at Info is fixed when its layers are built: asked once, so that a process
  // logging at Warn does not run an Effect per request only to drop its line.
  let requestLogs: Promise<boolean> | undefined;
  const logsRequests = () => {
    requestLogs ??= run(LogLevel.isEnabled("Info")).then((exit) => !Exit.isSuccess(exit) || exit.value);
    return requestLogs;
  };

  app.use(async (c, next) => {
    const started = performance.now();
    const requestId = newRequestId();
    c.set("requestId", requestId);
    await next();
    stampRequestId(c, requestId);
    const elapsedMs = performance.now() - started;
    options.metrics?.observeRequest({
      method: c.req.method,
      route: routeTemplate(c),
      status: c.res.status,
      seconds: elapsedMs / 1000,
    });
    if (POLLED_PATHS.has(c.req.path) || !(await logsRequests())) return;
    const entry = {
      request_id: requestId,
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
  const tooLarge = (c: HonoContext) =>
    respondFailure(
      c as HonoContext<Env>,
      new HttpRefusal({
        status: 413,
        code: "body_too_large",
        message: `Request bodies are limited to ${MAX_BODY_BYTES} bytes.`,
      }),
    );
  const limitBody = bodyLimit({ maxSize: MAX_BODY_BYTES, onError: tooLarge });
  // A GET or HEAD has no body. A body of declared length is judged by its Content-Length, as bodyLimit
  // judges it, without asking for the body as bodyLimit does first: that builds the full web Request,
  // and the body is then read from it instead of straight from the socket (~20 µs a POST).
  app.use(async (c, next) => {
    if (c.req.method === "GET" || c.req.method === "HEAD") return next();
    const declared = c.req.header("content-length");
    if (declared === undefined || c.req.header("transfer-encoding") !== undefined) return limitBody(c, next);
    return Number.parseInt(declared || "0", 10) > MAX_BODY_BYTES ? tooLarge(c) : next();
  });
  const limitPage = options.limitPage;
  if (limitPage)
    for (const pages of ["/authorize/*", "/pay/*", "/portal/*", "/assets/*", "/console/*"])
      app.use(pages, async (c, next) => {
        const refusal = await limitPage(c);
        if (refusal) return respondFailure(c, refusal);
        await next();
      });

  registerOperationalRoutes(app, options);
  const cookie = consoleCookie(options.publicUrl);
  registerConsoleSessionRoutes(app, async (c, effect, ok) => respondExit(c, await run(effect), ok), cookie);

  // Each /v1 request is one run on the runtime: authentication, the protocol's checks and the handler in
  // one fiber (the checks fail in the same order as they are listed).
  const limitRequest = options.limitRequest;
  for (const route of options.routes) {
    const status = route.status ?? 200;
    const requestClass = requestClassOf(route);
    const encodeBody = bodyEncoder(route.response);
    // The generator functions are created once per route (Effect.fnUntraced), not per request: an
    // Effect.gen whose generator function is new each time costs ~2 µs more (docs/performance.md, "The API").
    /** The caller, once authenticated, allowed on this route, with the path's params. */
    const admitted = Effect.fnUntraced(function* (c: HonoContext<Env>) {
      const caller: Caller = yield* authenticateRequest(c, cookie);
      c.set("merchantId", caller.merchantId);
      if (route.testOnly && caller.livemode) return yield* routeNotFound(c);
      const admission = limitRequest === undefined ? undefined : yield* limitRequest(caller, requestClass);
      if (admission !== undefined) {
        c.set("rateLimit", admission.state);
        if (admission.retryAfterSeconds !== undefined)
          return yield* rateLimited(requestClass, admission.state.limit, admission.retryAfterSeconds);
      }
      if (caller.restricted && route.method !== "GET") return yield* restrictedKeyRefusal;
      const params = yield* Effect.fromResult(decodeParams(c, route.params));
      return { caller, params };
    });

    if (route.method !== "POST") {
      const answer = Effect.fnUntraced(function* (c: HonoContext<Env>) {
        const { caller, params } = yield* admitted(c);
        const input = yield* Effect.fromResult(decodeQuery(c, route.body));
        const context = { caller, body: input, params };
        const download = route.download ? yield* route.download(context) : undefined;
        // A download's first chunk is read in the request's run: a failure before any byte is sent is
        // still an error response.
        if (download !== undefined) {
          const first = yield* download.next;
          return { download, first };
        }
        const value = yield* route.handler(context);
        return { body: yield* encodeBody(value) };
      });
      app.on(route.method, toHonoPath(route.path), async (c: HonoContext<Env>) => {
        const exit = await run(answer(c));
        return respondExit(c, exit, (answered) =>
          answered.download !== undefined
            ? streamDownload(c, answered.download, answered.first)
            : json(c, status, answered.body ?? "", rateLimitHeaders(c.get("rateLimit"))),
        );
      });
      continue;
    }

    const answer = Effect.fnUntraced(function* (
      c: HonoContext<Env>,
      body: Awaited<ReturnType<typeof readBody>>,
    ) {
      const { caller, params } = yield* admitted(c);
      const header = c.req.header("idempotency-key");
      if (route.idempotentByContent && header === undefined) {
        const input = yield* Effect.fromResult(body);
        const bodyText = yield* Effect.flatMap(
          route.handler({ caller, body: input.value, params }),
          encodeBody,
        );
        return { status, bodyText, replayed: false };
      }
      const key = yield* validateIdempotencyKey(header);
      const input = yield* Effect.fromResult(body);
      const idempotency = yield* Idempotency;
      return yield* idempotency.run(
        caller.apiKeyId,
        { key, method: route.method, path: c.req.path, body: input.raw },
        route.handler({ caller, body: input.value, params }).pipe(
          Effect.flatMap(encodeBody),
          Effect.map((bodyText) => ({ status, bodyText })),
        ),
        storableFailure,
        { transactional: route.transactional ?? false },
      );
    });
    app.on(route.method, toHonoPath(route.path), async (c: HonoContext<Env>) => {
      // Read before the run (it is the only wait outside it); its refusal, if any, comes after the others.
      const body = await readBody(c, route.body);
      const exit = await run(answer(c, body));
      return respondExit(c, exit, (stored) => {
        const limits = rateLimitHeaders(c.get("rateLimit"));
        return json(
          c,
          stored.status,
          stored.bodyText,
          stored.replayed ? { ...limits, "Idempotent-Replayed": "true" } : limits,
        );
      });
    });
  }

  for (const route of options.publicRoutes ?? []) {
    const encodeBody = bodyEncoder(route.response);
    app.on(route.method, toHonoPath(route.path), async (c: HonoContext<Env>) => {
      const params = decodeParams(c, route.params);
      if (Result.isFailure(params)) return respondFailure(c, params.failure);
      const input =
        route.method === "POST"
          ? await readBody(c, route.body)
          : Result.map(decodeQuery(c, route.body), (value) => ({ raw: value, value }));
      if (Result.isFailure(input)) return respondFailure(c, input.failure);
      const exit = await run(
        Effect.flatMap(route.handler({ body: input.success.value, params: params.success }), (value) =>
          encodeBody(value),
        ),
      );
      return respondExit(c, exit, (bodyText) => json(c, 200, bodyText, { "cache-control": "no-store" }));
    });
  }
  options.extend?.(app);

  app.notFound(notFound);
  app.onError(async (error, c) => respondDefect(c, Cause.die(error)));
  return app;
};
