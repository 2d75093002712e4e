/**
 * The service process: `/v1` over HTTP and the background workers, on one Effect runtime.
 * `startService` is the composition root; run this file directly for production (env config),
 * or let scripts/start.ts start it as part of the local stack. A plain Node 24 process running the
 * TypeScript directly (type stripping): the runtime's layer owns the HTTP server and the worker fibers,
 * which start once when it is built and stop when it is disposed, with no hot reload to duplicate them.
 */
import type { AddressInfo } from "node:net";
import { createAdaptorServer } from "@hono/node-server";
import { Cause, Effect, Exit, ManagedRuntime, Redacted } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import type { ApiKeys } from "./auth/api-keys.ts";
import type { ConsoleSessions } from "./auth/console-sessions.ts";
import type { BalanceStore } from "./balances/balance-store.ts";
import { verifyChains } from "./chains/chain-verification.ts";
import { loadChainsFile } from "./chains/config.ts";
import type { GasCosts } from "./chains/gas-costs.ts";
import { ChainWatch, describeStalled } from "./chains/indexer-watchdog.ts";
import type { MerchantChains } from "./chains/merchant-chains.ts";
import { chainHeads } from "./chains/onchain.ts";
import { ChainRegistry } from "./chains/registry.ts";
import { relayerAddressesOf } from "./chains/relayer-keys.ts";
import { describePaused, TokenStates } from "./chains/token-states.ts";
import type { Charges } from "./charges/charges.ts";
import { PAGE_LIMIT_DEFAULTS, type ServiceConfig, serviceConfigFromEnv } from "./config/env.ts";
import type { NotFound } from "./errors.ts";
import type { Events } from "./events/events.ts";
import { makeApp, type Readiness } from "./http/app.ts";
import { registerAuthorizationPage } from "./http/authorization-page/routes.ts";
import { answerClientError } from "./http/client-error.ts";
import { registerConsole } from "./http/console/routes.ts";
import { buildOpenApi } from "./http/openapi.ts";
import { type PageKind, type PageTokenExists, pageLimiter } from "./http/page-rate-limit.ts";
import { registerPayPage } from "./http/pay-page/routes.ts";
import { registerPortalPage } from "./http/portal-page/routes.ts";
import type { AnyRoute } from "./http/route.ts";
import { authorizationRoutes } from "./http/routes/authorization.ts";
import { balanceRoutes } from "./http/routes/balances.ts";
import { chainRoutes } from "./http/routes/chains.ts";
import { eventRoutes } from "./http/routes/events.ts";
import { gasCostRoutes } from "./http/routes/gas-costs.ts";
import { limitsRoutes } from "./http/routes/limits.ts";
import { mandateRoutes } from "./http/routes/mandates.ts";
import { payPageRoutes } from "./http/routes/pay-page.ts";
import { paymentRoutes } from "./http/routes/payments.ts";
import { portalPageRoutes, portalSessionRoutes } from "./http/routes/portal.ts";
import { reconciliationRoutes } from "./http/routes/reconciliation.ts";
import { reportRoutes } from "./http/routes/reports.ts";
import { subscriptionRoutes } from "./http/routes/subscriptions.ts";
import { testHelperRoutes } from "./http/routes/test-helpers.ts";
import { webhookRoutes } from "./http/routes/webhooks.ts";
import { x402Routes } from "./http/routes/x402.ts";
import type { Idempotency } from "./idempotency/idempotency.ts";
import { serviceLayer } from "./layers.ts";
import { RequestLimits } from "./limits/request-limits.ts";
import { AuthorizationSessions } from "./mandates/authorization-session.ts";
import type { Authorizations } from "./mandates/authorization-signing.ts";
import type { MandateStore } from "./mandates/mandate-store.ts";
import type { Mandates } from "./mandates/mandates.ts";
import type { Revocations } from "./mandates/revocations.ts";
import { Metrics, observeRequest } from "./metrics/metrics.ts";
import type { GaslessPayments } from "./payments/gasless-payments.ts";
import type { OpenPayments } from "./payments/open-payments.ts";
import { PaySessions } from "./payments/pay-session.ts";
import type { Payments } from "./payments/payments.ts";
import type { PortalActions } from "./portal/portal-actions.ts";
import { PortalSessions } from "./portal/portal-sessions.ts";
import type { PortalViews } from "./portal/portal-view.ts";
import type { Reconciliation } from "./reconciliation/reconciliation.ts";
import type { PeriodReports } from "./reports/period-reports.ts";
import type { Coupons } from "./subscriptions/coupons.ts";
import type { PlanChanges } from "./subscriptions/plan-changes.ts";
import type { Prices } from "./subscriptions/prices.ts";
import type { Subscriptions } from "./subscriptions/subscriptions.ts";
import type { Usage } from "./subscriptions/usage.ts";
import type { TestHelpers } from "./testing/test-helpers.ts";
import type { TestPayments } from "./testing/test-payments.ts";
import type { Deliveries } from "./webhooks/deliveries.ts";
import type { WebhookEndpoints } from "./webhooks/endpoints.ts";
import { Workers } from "./workers/runtime.ts";
import type { X402Facilitator } from "./x402/facilitator.ts";

export { domainLayer, loggingLayer, serviceLayer } from "./layers.ts";

export const VERSION = "0.1.0";

export type AppServices =
  | ApiKeys
  | ConsoleSessions
  | MerchantChains
  | ChainRegistry
  | Idempotency
  | Reconciliation
  | GasCosts
  | BalanceStore
  | PeriodReports
  | Mandates
  | Charges
  | Events
  | AuthorizationSessions
  | Authorizations
  | Revocations
  | MandateStore
  | TestHelpers
  | TestPayments
  | Payments
  | PaySessions
  | GaslessPayments
  | WebhookEndpoints
  | Deliveries
  | Prices
  | Coupons
  | Subscriptions
  | PlanChanges
  | Usage
  | PortalSessions
  | PortalViews
  | PortalActions
  | RequestLimits
  | OpenPayments
  | X402Facilitator;

export const routes: ReadonlyArray<AnyRoute<AppServices>> = [
  ...chainRoutes,
  ...limitsRoutes,
  ...mandateRoutes,
  ...paymentRoutes,
  ...eventRoutes,
  ...testHelperRoutes,
  ...reconciliationRoutes,
  ...gasCostRoutes,
  ...balanceRoutes,
  ...reportRoutes,
  ...subscriptionRoutes,
  ...webhookRoutes,
  ...portalSessionRoutes,
  ...x402Routes,
];

const ponderAnswersReady = async (ponderUrl: string): Promise<boolean> => {
  try {
    return (await fetch(`${ponderUrl}/ready`, { signal: AbortSignal.timeout(2000) })).status === 200;
  } catch {
    return false;
  }
};

export interface RunningService {
  readonly url: string;
  readonly port: number;
  stop(): Promise<void>;
}

export const startService = async (config: ServiceConfig): Promise<RunningService> => {
  // Listen first (answering 503) so that the public URL is known when the port is chosen by the OS.
  // The node bindings (`env`) carry the socket: the page's rate limits key on its remote address.
  let handle: (request: Request, env: unknown) => Response | Promise<Response> = () =>
    new Response(
      JSON.stringify({
        status: "starting",
        ready: false,
        checks: { database: "starting", indexer: "starting", workers: "starting" },
      }),
      { status: 503, headers: { "content-type": "application/json; charset=utf-8", "retry-after": "1" } },
    );
  const server = createAdaptorServer({
    fetch: (request, env) => handle(request, env),
    hostname: config.host,
    port: config.port,
  });
  server.on("clientError", answerClientError);
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${config.host === "0.0.0.0" ? "127.0.0.1" : config.host}:${port}`;
  const closeServer = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      if ("closeAllConnections" in server) server.closeAllConnections();
    });

  // Every chain that is not local is checked before anything else starts (chain-verification.ts).
  const verified = await Effect.runPromiseExit(
    loadChainsFile(config.chainsFile).pipe(
      Effect.flatMap((file) =>
        Effect.flatMap(relayerAddressesOf(file.chains, config.relayerKey), (relayers) =>
          verifyChains(file.chains, { relayers }),
        ),
      ),
    ),
  );
  if (Exit.isFailure(verified)) {
    await closeServer();
    throw Cause.squash(verified.cause);
  }

  const runtime = ManagedRuntime.make(serviceLayer({ ...config, publicUrl: config.publicUrl ?? url }));
  // Build the layer now: config errors and migrations fail the start, not the first request.
  await runtime.runPromise(Effect.void).catch(async (error: unknown) => {
    await closeServer();
    throw error;
  });

  const stalledChains = () =>
    runtime.runPromise(Effect.flatMap(Effect.service(ChainWatch), (watch) => watch.stalled));
  const indexerCheck = async (): Promise<string> => {
    // A stall (the watchdog's verdict) outranks what Ponder says of itself: a stalled Ponder says it is ready.
    const stalled = await stalledChains();
    if (stalled.length > 0) return describeStalled(stalled);
    if (config.ponderUrl === undefined) return "not_configured";
    if (!(await ponderAnswersReady(config.ponderUrl))) return "unreachable";
    // Ready once Ponder says so and every configured chain has an indexed head block.
    const indexed = await runtime.runPromise(
      Effect.orElseSucceed(chainHeads, () => new Map<number, bigint>()),
    );
    const chains = await runtime.runPromise(Effect.map(Effect.service(ChainRegistry), (r) => r.all));
    return chains.every((chain) => indexed.has(chain.id)) ? "ready" : "indexing";
  };

  const readiness = async (): Promise<Readiness> => {
    const [database, workers, indexer] = await Promise.all([
      runtime
        .runPromise(
          Effect.gen(function* () {
            const sql = yield* SqlClient.SqlClient;
            yield* sql`SELECT 1`;
            return "ready";
          }).pipe(
            Effect.timeout("2 seconds"),
            Effect.orElseSucceed(() => "unreachable"),
          ),
        )
        .catch(() => "unreachable"),
      // A worker whose last successful pass is too old (see staleAfter in workers.ts) is named.
      runtime
        .runPromise(Effect.flatMap(Effect.service(Workers), (w) => w.status))
        .then((status) => (status.ready ? "ready" : `stale: ${status.stale.join(", ")}`)),
      indexerCheck(),
    ]);
    // A paused token is shown, not counted against readiness: taking every replica out of the load
    // balancer would stop every other chain and token too, and the API already answers the paused
    // token's requests with a clear 503 `token_paused`.
    const tokens = await runtime.runPromise(
      Effect.map(
        Effect.flatMap(Effect.service(TokenStates), (states) => states.snapshot),
        describePaused,
      ),
    );
    const checks = { database, indexer, workers, tokens };
    return {
      ready:
        database === "ready" && workers === "ready" && (indexer === "ready" || indexer === "not_configured"),
      checks,
    };
  };

  const metrics = await runtime.runPromise(Effect.service(Metrics));
  const requestLimits = await runtime.runPromise(Effect.service(RequestLimits));
  const openapi = buildOpenApi(routes, { version: VERSION });
  // One lookup per kind of page, for the page's own 404 and for its rate limit.
  const pageSession = (
    page: PageKind,
    token: string,
  ): Effect.Effect<
    unknown,
    NotFound | SqlError.SqlError,
    AuthorizationSessions | PaySessions | PortalSessions
  > => {
    switch (page) {
      case "authorize":
        return Effect.flatMap(Effect.service(AuthorizationSessions), (sessions) =>
          sessions.mandateFor(token),
        );
      case "pay":
        return Effect.flatMap(Effect.service(PaySessions), (sessions) => sessions.paymentFor(token));
      case "portal":
        return Effect.flatMap(Effect.service(PortalSessions), (sessions) => sessions.access(token));
    }
  };
  const pageTokenExists: PageTokenExists = (page, token) =>
    runtime.runPromise(
      pageSession(page, token).pipe(
        Effect.as(true),
        Effect.catchTag("NotFound", () => Effect.succeed(false)),
      ),
    );
  const app = makeApp({
    routes,
    publicRoutes: [...authorizationRoutes, ...payPageRoutes, ...portalPageRoutes],
    extend: (hono) => {
      registerAuthorizationPage(hono, { tokenExists: (token) => pageTokenExists("authorize", token) });
      registerPayPage(hono, { tokenExists: (token) => pageTokenExists("pay", token) });
      registerPortalPage(hono, { tokenExists: (token) => pageTokenExists("portal", token) });
      registerConsole(hono);
    },
    run: (effect) => runtime.runPromiseExit(effect),
    limitRequest: (caller, requestClass) =>
      requestLimits.admit(caller.apiKeyId, caller.livemode, requestClass),
    limitPage: pageLimiter(config.page ?? PAGE_LIMIT_DEFAULTS, pageTokenExists, (effect) =>
      runtime.runPromise(effect),
    ),
    readiness,
    indexerLiveness: async () => ({ stalled: await stalledChains() }),
    metrics: {
      token: config.metricsToken === undefined ? undefined : Redacted.value(config.metricsToken),
      observeRequest: (request) => observeRequest(metrics, request),
      scrape: async () => ({
        contentType: metrics.registry.contentType,
        body: await metrics.registry.metrics(),
      }),
    },
    openapi,
    publicUrl: config.publicUrl,
  });
  handle = app.fetch;
  await runtime.runPromise(Effect.logInfo("service listening").pipe(Effect.annotateLogs({ url })));

  return {
    url,
    port,
    stop: async () => {
      await closeServer();
      await runtime.dispose();
    },
  };
};

if (import.meta.main) {
  const decoded = Effect.runSync(Effect.result(serviceConfigFromEnv));
  if (decoded._tag === "Failure") {
    console.error(`Refusing to start, bad configuration:\n${decoded.failure.message}`);
    process.exit(2);
  }
  const config = decoded.success;
  const service = await startService(config).catch((error: unknown) => {
    // A chain config or chain that fails its checks: one line per problem, no stack trace.
    const tag = (error as { readonly _tag?: unknown } | undefined)?._tag;
    if (error instanceof Error && (tag === "ChainsRefused" || tag === "ChainConfigError")) {
      console.error(`Refusing to start:\n${error.message}`);
      process.exit(2);
    }
    throw error;
  });
  const shutdown = () => {
    service.stop().then(() => process.exit(0));
  };
  process.once("SIGINT", shutdown);
  process.once("SIGTERM", shutdown);
}
