/**
 * The whole local stack, in order: Postgres -> local chains (anvil) -> contracts -> indexer (Ponder)
 * -> service (HTTP API and workers). `npm start` and the end-to-end tests both use this.
 */
import { randomBytes } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { PgClient } from "@effect/sql-pg";
import { Effect, type LogLevel, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import { privateKeyToAccount } from "viem/accounts";
import { verifyChains } from "../../service/chains/chain-verification.ts";
import { type ChainConfig, loadChainsFile } from "../../service/chains/config.ts";
import { relayerAddressesOf } from "../../service/chains/relayer-keys.ts";
import type { ServiceConfig } from "../../service/config/env.ts";
import { ONCHAIN_SCHEMA } from "../../service/db/client.ts";
import { type RunningService, startService } from "../../service/main.ts";
import { generateSecretsKey } from "../../service/webhooks/secret-box.ts";
import { abisUpToDate, writeAbis } from "../contracts/compile.ts";
import { type RunningAnvil, rpc, startAnvil } from "./anvil.ts";
import { type LocalChainRpc, recoverLocalChains } from "./chain-recovery.ts";
import { superviseIndexer } from "./indexer-supervisor.ts";
import { ponderSchemaName, type RunningPonder, releaseStaleLock, startPonder } from "./ponder.ts";
import { type RunningPostgres, startEmbeddedPostgres } from "./postgres.ts";
import { removePostgresData } from "./postgres-paths.ts";
import { type DevMerchant, seedDevMerchant } from "./seed.ts";
import { startServiceProcess } from "./service-process.ts";
import { freePort, waitFor } from "./wait.ts";

export interface StackOptions {
  readonly dataDir: string;
  /** Source chain config (chains with `local` are started here). */
  readonly chainsConfig: string;
  readonly port: number;
  readonly ponderPort?: number;
  readonly postgresPort?: number;
  /** An external Postgres; otherwise embedded Postgres under dataDir. */
  readonly databaseUrl?: string;
  /** Keep the database and local chains across restarts. */
  readonly persistent: boolean;
  /** With `persistent`: how often each local chain saves its state (default 5 s). */
  readonly chainSaveSeconds?: number;
  /** Local chains mine each block at a cost flat in their state's size (anvil.ts, `flatBlockCost`). */
  readonly flatBlockCost?: boolean;
  readonly devApiKey?: string;
  /**
   * The relayer's key (RELAYER_PRIVATE_KEY). Default: anvil's third account, allowed only when every
   * chain is local; the service refuses a publicly known key for any other chain.
   */
  readonly relayerKey?: `0x${string}` | undefined;
  readonly logFormat: "json" | "pretty";
  readonly logLevel: LogLevel.LogLevel;
  readonly onOutput: (source: string, line: string) => void;
  /** One line per local chain rebuilt because it lost blocks (see chain-recovery.ts). */
  readonly onRecovery?: (line: string) => void;
  /** The public page's limits (default: the service's); a benchmark signing thousands lifts them. */
  readonly page?: ServiceConfig["page"];
  /** The API's request rates and open payments (default: the service's); see UNREACHED_REQUEST_RATES. */
  readonly apiLimits?: ServiceConfig["apiLimits"];
  /** The service's INDEXER_STALL_SECONDS (default 20 here: a local chain's blocks index in milliseconds). */
  readonly indexerStallSeconds?: number;
  /** Restart the indexer when the service finds a chain's indexing stalled (scripts/stack/indexer-supervisor.ts). */
  readonly restartStalledIndexer?: boolean;
  /** Bearer token of GET /metrics; default: generated once per data directory (`metrics.token`). */
  readonly metricsToken?: string;
  /**
   * Aborts the start (Ctrl-C while `npm start` starts): the step under way ends, whatever has started
   * is stopped, and `startStack` rejects with the signal's reason.
   */
  readonly signal?: AbortSignal | undefined;
  /**
   * RPC endpoints put in front of a local chain's anvil once its contracts are deployed: the indexer and
   * the service use them instead (a counting or misbehaving proxy, scripts/stack/rpc-proxy.ts).
   */
  readonly rpcInFront?: (chainId: number, anvil: RunningAnvil) => Promise<RpcEndpoints>;
  /**
   * Where the service runs: in this process (the default), or as a process of its own as deployed
   * (scripts/stack/service-process.ts), its output given to `onOutput` as "service".
   */
  readonly serviceProcess?: "in-process" | "child";
}

export interface RpcEndpoints {
  readonly http: readonly [string, ...string[]];
  readonly ws?: string;
}

export interface RunningStack {
  readonly apiUrl: string;
  readonly ponderUrl: string;
  readonly databaseUrl: string;
  readonly chainsFile: string;
  readonly chains: readonly ChainConfig[];
  readonly devMerchant: DevMerchant;
  /** Every service process on this database needs it to sign webhook deliveries. */
  readonly webhookSecretsKey: string;
  /** The relayer's key: every service process on these chains signs with it. */
  readonly relayerKey: `0x${string}`;
  /** `Authorization: Bearer <metricsToken>` reads GET /metrics. */
  readonly metricsToken: string;
  readonly timings: Readonly<Record<string, number>>;
  /** For fault-injection tests: the processes, and restarts of the database and the indexer. */
  readonly anvilPids: ReadonlyMap<number, number>;
  ponderPid(): number;
  /** Stops embedded Postgres (fast shutdown) and starts it again on the same port and data. */
  restartPostgres(): Promise<void>;
  /** Stops the indexer (or finds it dead) and starts it again on its schema; resolves once it is ready. */
  restartPonder(): Promise<void>;
  /**
   * Stops the service (API and workers), runs `meanwhile`, and starts it again on the same port;
   * resolves once it is ready.
   */
  restartService(meanwhile?: () => Promise<void>): Promise<void>;
  stop(): Promise<void>;
}

/** The chain on other RPC endpoints, with its other RPC settings kept. */
const withRpc = (chain: ChainConfig, endpoints: RpcEndpoints): ChainConfig => {
  const { http: _http, ws: _ws, ...settings } = chain.rpc ?? {};
  return {
    ...chain,
    rpc: { ...settings, http: endpoints.http, ...(endpoints.ws === undefined ? {} : { ws: endpoints.ws }) },
  };
};

/** WEBHOOK_SECRETS_KEY from the environment, or one generated once per data directory. */
const webhookSecretsKey = (dataDir: string): string => {
  if (process.env.WEBHOOK_SECRETS_KEY) return process.env.WEBHOOK_SECRETS_KEY;
  const file = join(dataDir, "webhook-secrets.key");
  if (!existsSync(file)) writeFileSync(file, `${generateSecretsKey()}\n`, { mode: 0o600 });
  return readFileSync(file, "utf8").trim();
};

/** The metrics token given, or one generated once per data directory. */
const metricsToken = (dataDir: string, given: string | undefined): string => {
  if (given) return given;
  const file = join(dataDir, "metrics.token");
  if (!existsSync(file)) writeFileSync(file, `${randomBytes(24).toString("base64url")}\n`, { mode: 0o600 });
  return readFileSync(file, "utf8").trim();
};

/** A stack.json left behind means its supervisor was killed: stop the children it recorded. */
export const stopLeftovers = async (stackFile: string): Promise<void> => {
  if (!existsSync(stackFile)) return;
  const { processes = [] } = JSON.parse(readFileSync(stackFile, "utf8")) as { processes?: number[] };
  for (const pid of processes) {
    const cmdline = existsSync(`/proc/${pid}/cmdline`) ? readFileSync(`/proc/${pid}/cmdline`, "utf8") : "";
    if (/anvil|ponder|service\/main\.ts/.test(cmdline)) process.kill(pid, "SIGTERM");
  }
  rmSync(stackFile, { force: true });
  await new Promise((resolve) => setTimeout(resolve, 500));
};

/**
 * Waits until the indexer has caught up with every local chain. anvil mines only on demand, and Ponder
 * indexes the blocks above its finalized one only when a new block arrives (after a crash it also reverts
 * them): without a new block it would sit behind for good, only logging "No new block received within
 * expected time". So each local chain gets a block, and another every 2 s until its head is indexed.
 */
const indexerCaughtUp = async (
  databaseUrl: string,
  chains: readonly LocalChainRpc[],
  anvils: readonly RunningAnvil[],
  signal?: AbortSignal,
): Promise<void> => {
  for (const anvil of anvils) await anvil.mine();
  const targets = new Map<number, bigint>();
  for (const chain of chains)
    targets.set(chain.id, BigInt((await rpc(chain.http, "eth_blockNumber")) as string));
  const caughtUp = () =>
    Effect.runPromise(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient;
        const rows = yield* sql<{ chain_id: number; block_number: string }>`
          SELECT chain_id, block_number::text FROM ${sql(ONCHAIN_SCHEMA)}.chain_head`;
        return chains.every((chain) =>
          rows.some(
            (row) =>
              Number(row.chain_id) === chain.id && BigInt(row.block_number) >= (targets.get(chain.id) ?? 0n),
          ),
        );
      }).pipe(
        Effect.orElseSucceed(() => false),
        Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 })),
      ),
    );
  let minedAt = performance.now();
  await waitFor(
    async () => {
      if (await caughtUp()) return true;
      if (performance.now() - minedAt > 2_000) {
        for (const anvil of anvils) await anvil.mine();
        minedAt = performance.now();
      }
      return false;
    },
    {
      timeoutMs: 60_000,
      intervalMs: 100,
      what: "the indexer to catch up with every local chain",
      signal,
    },
  );
};

export const startStack = async (options: StackOptions): Promise<RunningStack> => {
  const timings: Record<string, number> = {};
  const started = performance.now();
  const signal = options.signal;
  // After each step: its time, and the end of the start if it was aborted meanwhile.
  const mark = (step: string) => {
    timings[step] = Math.round(performance.now() - started);
    signal?.throwIfAborted();
  };
  const stops: Array<() => Promise<void>> = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    stops.length = 0;
  };
  mkdirSync(options.dataDir, { recursive: true });
  await stopLeftovers(join(options.dataDir, "stack.json"));
  try {
    const source = await Effect.runPromise(Effect.result(loadChainsFile(options.chainsConfig)));
    if (source._tag === "Failure") throw new Error(`invalid chain config: ${source.failure.message}`);
    const remote = source.success.chains.filter((chain) => !chain.local);
    if (options.relayerKey === undefined && remote.length > 0)
      throw new Error(
        `RELAYER_PRIVATE_KEY must be set: chain ${remote.map((chain) => chain.id).join(", ")} is not local, and anvil's keys are public`,
      );

    let postgres: RunningPostgres | undefined;
    let databaseUrl = options.databaseUrl;
    const postgresOptions = {
      dataDir: join(options.dataDir, "postgres"),
      port: options.postgresPort ?? (await freePort()),
      database: "billing",
    };
    if (databaseUrl === undefined) {
      // Run after Postgres stops: as root its data lives outside dataDir (see postgres-paths.ts).
      if (!options.persistent) stops.push(async () => void removePostgresData(postgresOptions.dataDir));
      postgres = await startEmbeddedPostgres(postgresOptions);
      stops.push(() => postgres?.stop() ?? Promise.resolve());
      databaseUrl = postgres.url;
    }
    mark("postgres");

    if (!abisUpToDate()) writeAbis();
    mark("contracts_compiled");
    const { resolveLocalChain, LOCAL_RELAYER_KEY } = await import("./local-chain.ts");
    const relayerKey = options.relayerKey ?? LOCAL_RELAYER_KEY;
    const relayer = privateKeyToAccount(relayerKey);
    const chains: ChainConfig[] = [];
    const anvils: RunningAnvil[] = [];
    const localChains: LocalChainRpc[] = [];
    for (const chain of source.success.chains) {
      signal?.throwIfAborted();
      if (!chain.local) {
        chains.push(chain);
        continue;
      }
      const anvil: RunningAnvil = await startAnvil({
        port: chain.local.port === 0 ? await freePort() : chain.local.port,
        chainId: chain.id,
        ...(options.persistent
          ? {
              stateFile: join(options.dataDir, `anvil-${chain.id}.json`),
              stateSaveSeconds: options.chainSaveSeconds ?? 5,
            }
          : {}),
        ...(options.flatBlockCost ? { flatBlockCost: { upstreamPort: await freePort() } } : {}),
        onOutput: (line) => options.onOutput(`anvil ${chain.id}`, line),
        signal,
      });
      stops.push(anvil.stop);
      anvils.push(anvil);
      localChains.push({ id: chain.id, http: anvil.http });
      const resolved = await resolveLocalChain(
        chain,
        anvil,
        join(options.dataDir, "deployments.json"),
        relayer.address,
      );
      const front = await options.rpcInFront?.(chain.id, anvil);
      chains.push(front === undefined ? resolved : withRpc(resolved, front));
    }
    // Chains that are not local must be what the config says before anything indexes or sends on them.
    const verified = await Effect.runPromise(
      Effect.result(
        Effect.flatMap(relayerAddressesOf(chains, Redacted.make(relayerKey)), (relayers) =>
          verifyChains(chains, { relayers }),
        ),
      ),
    );
    if (verified._tag === "Failure") throw new Error(`refusing to start:\n${verified.failure.message}`);
    mark("chains");
    const chainsFile = join(options.dataDir, "chains.resolved.json");
    const resolvedJson = `${JSON.stringify({ chains }, null, 2)}\n`;
    writeFileSync(chainsFile, resolvedJson);

    const ponderPort = options.ponderPort ?? (await freePort());
    const secretsKey = webhookSecretsKey(options.dataDir);
    const scrapeToken = metricsToken(options.dataDir, options.metricsToken);
    const serviceConfig: ServiceConfig = {
      host: "127.0.0.1",
      port: options.port,
      databaseUrl,
      databasePoolSize: 20,
      chainsFile,
      ponderUrl: `http://127.0.0.1:${ponderPort}`,
      logFormat: options.logFormat,
      logLevel: options.logLevel,
      idempotencyRetentionHours: 24,
      relayerKey: Redacted.make(relayerKey),
      relayerBumpAfterSeconds: 30,
      webhooks: {
        secretsKey: Redacted.make(secretsKey),
        allowPrivateInTest: true,
        timeoutSeconds: 10,
        maxInFlight: 256,
        maxInFlightPerEndpoint: 16,
      },
      ...(options.page ? { page: options.page } : {}),
      ...(options.apiLimits ? { apiLimits: options.apiLimits } : {}),
      metricsToken: Redacted.make(scrapeToken),
      indexerStallSeconds: options.indexerStallSeconds ?? 20,
    };
    const devMerchant = await Effect.runPromise(
      seedDevMerchant(serviceConfig, join(options.dataDir, "dev-merchant.json"), options.devApiKey),
    );
    mark("database_seeded");

    const ponderSchema = ponderSchemaName(resolvedJson);
    if (options.persistent && anvils.length > 0) {
      const rebuilt = await recoverLocalChains(databaseUrl, ponderSchema, localChains);
      for (const line of rebuilt) (options.onRecovery ?? console.log)(line);
    }
    mark("chains_checked");
    if (postgres) await releaseStaleLock(databaseUrl, ponderSchema);
    const ponderOptions = {
      databaseUrl,
      chainsFile,
      schema: ponderSchema,
      port: ponderPort,
      logFormat: options.logFormat,
      onOutput: (line: string) => options.onOutput("indexer", line),
    };
    let ponder: RunningPonder = await startPonder({ ...ponderOptions, signal });
    stops.push(() => ponder.stop());
    await indexerCaughtUp(databaseUrl, localChains, anvils, signal);
    mark("indexer_started");

    const launchService = (config: ServiceConfig) =>
      options.serviceProcess === "child"
        ? startServiceProcess(config, (line) => options.onOutput("service", line), signal)
        : startService(config);
    // A service of its own process has a pid, which the stack file lists for a later start to stop.
    let service: RunningService & { readonly pid?: number } = await launchService(serviceConfig);
    stops.push(() => service.stop());
    const serviceReady = () =>
      waitFor(async () => (await fetch(`${service.url}/ready`).catch(() => undefined))?.status === 200, {
        timeoutMs: 60_000,
        what: "GET /ready to answer 200 (API, indexer and workers)",
        intervalMs: 100,
        signal,
      });
    await serviceReady();
    mark("service_ready");

    const stackFile = join(options.dataDir, "stack.json");
    // Rewritten after each indexer or service restart: a supervisor killed later must leave none running.
    const writeStackFile = () => {
      const processes = [
        ...anvils.map((a) => a.pid),
        ponder.pid,
        ...(service.pid === undefined ? [] : [service.pid]),
      ];
      writeFileSync(
        stackFile,
        `${JSON.stringify({ databaseUrl, apiUrl: service.url, ponderUrl: ponder.url, chainsFile, processes }, null, 2)}\n`,
      );
    };
    writeStackFile();
    stops.push(async () => rmSync(stackFile, { force: true }));

    const running: RunningStack = {
      apiUrl: service.url,
      ponderUrl: ponder.url,
      databaseUrl,
      chainsFile,
      chains,
      devMerchant,
      webhookSecretsKey: secretsKey,
      relayerKey,
      metricsToken: scrapeToken,
      timings,
      anvilPids: new Map(localChains.map((chain, i) => [chain.id, anvils[i]?.pid ?? -1])),
      ponderPid: () => ponder.pid,
      restartPostgres: async () => {
        if (postgres === undefined) throw new Error("the stack does not run this database");
        await postgres.stop();
        postgres = await startEmbeddedPostgres(postgresOptions);
      },
      restartPonder: async () => {
        await ponder.stop();
        if (postgres) await releaseStaleLock(ponderOptions.databaseUrl, ponderSchema);
        ponder = await startPonder(ponderOptions);
        writeStackFile();
        await indexerCaughtUp(ponderOptions.databaseUrl, localChains, anvils);
      },
      restartService: async (meanwhile) => {
        await service.stop();
        await meanwhile?.();
        service = await launchService({ ...serviceConfig, port: service.port });
        writeStackFile();
        await serviceReady();
      },
      stop: stopAll,
    };
    if (options.restartStalledIndexer) {
      const supervisor = superviseIndexer({
        serviceUrl: service.url,
        ponderPid: running.ponderPid,
        restart: running.restartPonder,
        onLine: options.onRecovery ?? console.log,
      });
      stops.push(supervisor.stop);
    }
    return running;
  } catch (error) {
    await stopAll();
    throw error;
  }
};
