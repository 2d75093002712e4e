/**
 * The service process: `/v1` over HTTP and the background workers, on one Effect runtime.
 * `startService` is the composition root; run this file directly for production (env config),
 * or let scripts/start.ts start it as part of the local stack.
 */
import type { AddressInfo } from "node:net";
import type { PgClient } from "@effect/sql-pg";
import { createAdaptorServer } from "@hono/node-server";
import { Duration, Effect, Layer, Logger, ManagedRuntime, References } from "effect";
import { SqlClient } from "effect/sql";
import { ApiKeys } from "./auth/api-keys.ts";
import { MerchantChains } from "./chains/merchant-chains.ts";
import { chainHeads } from "./chains/onchain.ts";
import { ChainRegistry } from "./chains/registry.ts";
import { Relayer, relayerTracker } from "./chains/relayer.ts";
import { type ServiceConfig, serviceConfigFromEnv } from "./config/env.ts";
import { databaseLayer } from "./db/client.ts";
import { runMigrations } from "./db/migrations.ts";
import { factRelay } from "./events/fact-relay.ts";
import { makeApp, type Readiness } from "./http/app.ts";
import { renderDocsPage } from "./http/docs-page.ts";
import { buildOpenApi } from "./http/openapi.ts";
import type { AnyRoute } from "./http/route.ts";
import { chainRoutes } from "./http/routes/chains.ts";
import { reconciliationRoutes } from "./http/routes/reconciliation.ts";
import { Idempotency } from "./idempotency/idempotency.ts";
import { Merchants } from "./merchants/merchants.ts";
import { Reconciliation } from "./reconciliation/reconciliation.ts";
import { idempotencyPurge, runWorkers, Workers } from "./workers/workers.ts";

export const VERSION = "0.1.0";

export type AppServices = ApiKeys | Merchants | MerchantChains | ChainRegistry | Idempotency | Reconciliation;

export const routes: ReadonlyArray<AnyRoute<AppServices>> = [...chainRoutes, ...reconciliationRoutes];

export const loggingLayer = (config: Pick<ServiceConfig, "logFormat" | "logLevel">) =>
  Layer.mergeAll(
    Logger.layer([config.logFormat === "json" ? Logger.consoleJson : Logger.consoleLogFmt]),
    Layer.succeed(References.MinimumLogLevel, config.logLevel),
  );

/** Everything the domain needs, with the schema migrated before anything uses it. */
export const domainLayer = (config: ServiceConfig) => {
  const infrastructure = Layer.mergeAll(
    databaseLayer(config.databaseUrl, config.databasePoolSize),
    ChainRegistry.fromFile(config.chainsFile),
  );
  const migrated = Layer.effectDiscard(runMigrations).pipe(Layer.provide(infrastructure));
  return Layer.mergeAll(
    ApiKeys.layer,
    Merchants.layer,
    MerchantChains.layer,
    Reconciliation.layer,
    Relayer.layer({ key: config.relayerKey, bumpAfter: Duration.seconds(config.relayerBumpAfterSeconds) }),
    Idempotency.layer(Duration.hours(config.idempotencyRetentionHours)),
  ).pipe(Layer.provideMerge(infrastructure), Layer.provide(migrated));
};

export const serviceLayer = (config: ServiceConfig) => {
  const domain = domainLayer(config);
  const workers = runWorkers<Idempotency | PgClient.PgClient | SqlClient.SqlClient | ChainRegistry | Relayer>(
    [idempotencyPurge, factRelay, relayerTracker],
  ).pipe(Layer.provide(domain));
  return Layer.mergeAll(domain, workers).pipe(
    Layer.provide(loggingLayer(config)),
    Layer.merge(loggingLayer(config)),
  );
};

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
  const runtime = ManagedRuntime.make(serviceLayer(config));
  // Build the layer now: config errors and migrations fail the start, not the first request.
  await runtime.runPromise(Effect.void);

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
      runtime
        .runPromise(Effect.flatMap(Effect.service(Workers), (w) => w.ready))
        .then((ok) => (ok ? "ready" : "starting")),
      config.ponderUrl === undefined
        ? Promise.resolve("not_configured")
        : ponderAnswersReady(config.ponderUrl).then(async (up) => {
            if (!up) return "unreachable";
            // Ready once Ponder says so and every configured chain has an indexed head block.
            const indexed = await runtime.runPromise(
              Effect.orElseSucceed(chainHeads, () => new Map<number, bigint>()),
            );
            const chains = await runtime.runPromise(Effect.map(Effect.service(ChainRegistry), (r) => r.all));
            return chains.every((chain) => indexed.has(chain.id)) ? "ready" : "indexing";
          }),
    ]);
    const checks = { database, indexer, workers };
    return {
      ready:
        database === "ready" && workers === "ready" && (indexer === "ready" || indexer === "not_configured"),
      checks,
    };
  };

  const openapi = buildOpenApi(routes, { version: VERSION });
  const app = makeApp({
    routes,
    run: (effect) => runtime.runPromiseExit(effect),
    readiness,
    openapi,
    docsPage: renderDocsPage(openapi),
  });
  const server = createAdaptorServer({ fetch: app.fetch, hostname: config.host, port: config.port });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${config.host === "0.0.0.0" ? "127.0.0.1" : config.host}:${port}`;
  await runtime.runPromise(Effect.logInfo("service listening").pipe(Effect.annotateLogs({ url })));

  return {
    url,
    port,
    stop: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        if ("closeAllConnections" in server) server.closeAllConnections();
      });
      await runtime.dispose();
    },
  };
};

if (import.meta.main) {
  const config = Effect.runSync(serviceConfigFromEnv);
  const service = await startService(config);
  const shutdown = () => {
    service.stop().then(() => process.exit(0));
  };
  process.once("SIGINT", shutdown);
  process.once("SIGTERM", shutdown);
}
