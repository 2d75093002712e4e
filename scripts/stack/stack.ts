/**
 * The whole local stack, in order: Postgres -> local chains (anvil) -> contracts -> indexer (Ponder)
 * -> service (HTTP API and workers). `npm start` and the end-to-end tests both use this.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Effect, type LogLevel, Redacted } from "effect";
import { type ChainConfig, loadChainsFile } from "../../service/chains/config.ts";
import type { ServiceConfig } from "../../service/config/env.ts";
import { type RunningService, startService } from "../../service/main.ts";
import { generateSecretsKey } from "../../service/webhooks/secret-box.ts";
import { abisUpToDate, writeAbis } from "../contracts/compile.ts";
import { type RunningAnvil, startAnvil } from "./anvil.ts";
import { type LocalChainRpc, recoverLocalChains } from "./chain-recovery.ts";
import { ponderSchemaName, type RunningPonder, releaseStaleLock, startPonder } from "./ponder.ts";
import { type RunningPostgres, startEmbeddedPostgres } from "./postgres.ts";
import { type DevMerchant, seedDevMerchant } from "./seed.ts";
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
  readonly devApiKey?: string;
  readonly logFormat: "json" | "pretty";
  readonly logLevel: LogLevel.LogLevel;
  readonly onOutput: (source: string, line: string) => void;
  /** One line per local chain rebuilt because it lost blocks (see chain-recovery.ts). */
  readonly onRecovery?: (line: string) => void;
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
  readonly timings: Readonly<Record<string, number>>;
  stop(): Promise<void>;
}

/** WEBHOOK_SECRETS_KEY from the environment, or one generated once per data directory. */
const webhookSecretsKey = (dataDir: string): string => {
  if (process.env.WEBHOOK_SECRETS_KEY) return process.env.WEBHOOK_SECRETS_KEY;
  const file = join(dataDir, "webhook-secrets.key");
  if (!existsSync(file)) writeFileSync(file, `${generateSecretsKey()}\n`, { mode: 0o600 });
  return readFileSync(file, "utf8").trim();
};

/** A stack.json left behind means its supervisor was killed: stop the children it recorded. */
const stopLeftovers = async (stackFile: string): Promise<void> => {
  if (!existsSync(stackFile)) return;
  const { processes = [] } = JSON.parse(readFileSync(stackFile, "utf8")) as { processes?: number[] };
  for (const pid of processes) {
    const cmdline = existsSync(`/proc/${pid}/cmdline`) ? readFileSync(`/proc/${pid}/cmdline`, "utf8") : "";
    if (/anvil|ponder/.test(cmdline)) process.kill(pid, "SIGTERM");
  }
  rmSync(stackFile, { force: true });
  await new Promise((resolve) => setTimeout(resolve, 500));
};

export const startStack = async (options: StackOptions): Promise<RunningStack> => {
  const timings: Record<string, number> = {};
  const started = performance.now();
  const mark = (step: string) => {
    timings[step] = Math.round(performance.now() - started);
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

    let postgres: RunningPostgres | undefined;
    let databaseUrl = options.databaseUrl;
    if (databaseUrl === undefined) {
      postgres = await startEmbeddedPostgres({
        dataDir: join(options.dataDir, "postgres"),
        port: options.postgresPort ?? (await freePort()),
        database: "billing",
      });
      stops.push(postgres.stop);
      databaseUrl = postgres.url;
    }
    mark("postgres");

    if (!abisUpToDate()) writeAbis();
    mark("contracts_compiled");
    const { resolveLocalChain, LOCAL_RELAYER_KEY } = await import("./local-chain.ts");
    const chains: ChainConfig[] = [];
    const anvils: RunningAnvil[] = [];
    const localChains: LocalChainRpc[] = [];
    for (const chain of source.success.chains) {
      if (!chain.local) {
        chains.push(chain);
        continue;
      }
      const anvil: RunningAnvil = await startAnvil({
        port: chain.local.port === 0 ? await freePort() : chain.local.port,
        chainId: chain.id,
        ...(options.persistent ? { stateFile: join(options.dataDir, `anvil-${chain.id}.json`) } : {}),
        onOutput: (line) => options.onOutput(`anvil ${chain.id}`, line),
      });
      stops.push(anvil.stop);
      anvils.push(anvil);
      localChains.push({ id: chain.id, http: anvil.http });
      chains.push(await resolveLocalChain(chain, anvil, join(options.dataDir, "deployments.json")));
    }
    mark("chains");
    const chainsFile = join(options.dataDir, "chains.resolved.json");
    const resolvedJson = `${JSON.stringify({ chains }, null, 2)}\n`;
    writeFileSync(chainsFile, resolvedJson);

    const ponderPort = options.ponderPort ?? (await freePort());
    const secretsKey = webhookSecretsKey(options.dataDir);
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
      relayerKey: Redacted.make(
        (process.env.RELAYER_PRIVATE_KEY as `0x${string}` | undefined) ?? LOCAL_RELAYER_KEY,
      ),
      relayerBumpAfterSeconds: 30,
      webhooks: {
        secretsKey: Redacted.make(secretsKey),
        allowPrivateInTest: true,
        timeoutSeconds: 10,
        maxInFlight: 256,
        maxInFlightPerEndpoint: 16,
      },
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
    const ponder: RunningPonder = await startPonder({
      databaseUrl,
      chainsFile,
      schema: ponderSchema,
      port: ponderPort,
      logFormat: options.logFormat,
      onOutput: (line) => options.onOutput("indexer", line),
    });
    stops.push(ponder.stop);
    // Ponder indexes from the next block on (anvil mines only on demand): give it one.
    for (const anvil of anvils) await anvil.mine();
    mark("indexer_started");

    const service: RunningService = await startService(serviceConfig);
    stops.push(service.stop);
    await waitFor(async () => (await fetch(`${service.url}/ready`).catch(() => undefined))?.status === 200, {
      timeoutMs: 60_000,
      what: "GET /ready to answer 200 (API, indexer and workers)",
      intervalMs: 100,
    });
    mark("service_ready");

    const stackFile = join(options.dataDir, "stack.json");
    const processes = [...anvils.map((a) => a.pid), ponder.pid];
    writeFileSync(
      stackFile,
      `${JSON.stringify({ databaseUrl, apiUrl: service.url, ponderUrl: ponder.url, processes }, null, 2)}\n`,
    );
    stops.push(async () => rmSync(stackFile, { force: true }));

    return {
      apiUrl: service.url,
      ponderUrl: ponder.url,
      databaseUrl,
      chainsFile,
      chains,
      devMerchant,
      webhookSecretsKey: secretsKey,
      timings,
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
};
