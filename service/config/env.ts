/**
 * The environment, decoded once with the rules of every variable (env-rules.ts): the service process
 * (`serviceConfigFromEnv`) and the local stack (`stackEnvFromEnv`, for `npm start`) share them, and both
 * refuse to start on a bad value with one line per variable naming its rule. An empty value counts as
 * unset (Effect's env provider reads it so).
 */
import { type Config, Effect, type LogLevel, Option, Redacted, Result, Schema } from "effect";
import { REQUEST_RATE_DEFAULTS, type RequestRateLimits } from "../limits/request-limits.ts";
import { env, required, withDefault } from "./env-rules.ts";

export { env } from "./env-rules.ts";

export interface ServiceConfig {
  readonly host: string;
  readonly port: number;
  readonly databaseUrl: string;
  readonly databasePoolSize: number;
  /** A resolved chains file: every chain with its RPC and contract addresses. */
  readonly chainsFile: string;
  /** Where the Ponder indexer answers /ready; undefined when this process does not depend on one. */
  readonly ponderUrl: string | undefined;
  readonly logFormat: "json" | "pretty";
  readonly logLevel: LogLevel.LogLevel;
  readonly idempotencyRetentionHours: number;
  /** The relayer's private key (pays the gas of escrow transactions); none: the service cannot send any. */
  readonly relayerKey: Redacted.Redacted<`0x${string}`> | undefined;
  /** Replace a relayer transaction still unmined after this many seconds. */
  readonly relayerBumpAfterSeconds: number;
  /** Public base URL of this service (the hosted pages' links); default: where it listens. */
  readonly publicUrl?: string | undefined;
  readonly webhooks: WebhookConfig;
  /** Limits of the hosted pages (default: PAGE_LIMIT_DEFAULTS). */
  readonly page?: PageLimitsConfig;
  /** Limits of the API's merchants (default: API_LIMIT_DEFAULTS). */
  readonly apiLimits?: ApiLimitsConfig;
  /** Bearer token of `GET /metrics`; none: the endpoint does not exist (404). */
  readonly metricsToken?: Redacted.Redacted<string> | undefined;
  /** A chain moving on while its indexed head stays put this long is stalled (default 60). */
  readonly indexerStallSeconds?: number;
}

export interface PageLimitsConfig {
  /** Requests per minute per client (IPv4 address or IPv6 /64) and per page token; 0: unlimited. */
  readonly perAddressPerMinute: number;
  readonly perTokenPerMinute: number;
  /** Take the client address from X-Forwarded-For's right-most entry. */
  readonly trustProxy: boolean;
  /** Authorize transactions the relayer sends per mandate in a day. */
  readonly authorizationsPerMandatePerDay: number;
}

/** The page limits when neither the environment nor the caller sets them. */
export const PAGE_LIMIT_DEFAULTS: PageLimitsConfig = {
  perAddressPerMinute: 600,
  perTokenPerMinute: 240,
  trustProxy: false,
  authorizationsPerMandatePerDay: 5,
};

/** Request rates per API key (limits/request-limits.ts) and open payments per merchant and chain. */
export interface ApiLimitsConfig extends RequestRateLimits {
  /** Payments a merchant may have open at once on one chain; 0: no limit. */
  readonly openPaymentsPerChain: number;
}

export const API_LIMIT_DEFAULTS: ApiLimitsConfig = {
  ...REQUEST_RATE_DEFAULTS,
  openPaymentsPerChain: 10_000,
};

export interface WebhookConfig {
  /** 32 bytes, base64: the AES-256-GCM key that encrypts endpoints' signing secrets at rest. */
  readonly secretsKey: Redacted.Redacted<string>;
  /** Test-mode endpoints may point at localhost and private addresses (a local deployment). */
  readonly allowPrivateInTest: boolean;
  /** One attempt's limit: connect, send and answer. */
  readonly timeoutSeconds: number;
  /** Deliveries in flight per process, and per endpoint per process. */
  readonly maxInFlight: number;
  readonly maxInFlightPerEndpoint: number;
}

/** Every bad variable of the environment, one line each (`NAME must be …, got "…"`). */
export class EnvInvalid extends Schema.TaggedError<EnvInvalid>()("EnvInvalid", {
  problems: Schema.Array(Schema.String),
}) {
  override get message(): string {
    return this.problems.join("\n");
  }
}

type Decoded<R> = { readonly [K in keyof R]: R[K] extends Config.Config<infer A> ? A : never };

/** Reads every config in the record, and fails with every problem at once, not just the first. */
const decodeAll = <R extends Record<string, Config.Config<unknown>>>(
  configs: R,
): Effect.Effect<Decoded<R>, EnvInvalid> =>
  Effect.gen(function* () {
    const out: Record<string, unknown> = {};
    const problems: string[] = [];
    for (const [key, config] of Object.entries(configs)) {
      const result = yield* Effect.result(config);
      if (Result.isSuccess(result)) out[key] = result.success;
      else
        problems.push(
          result.failure.cause._tag === "SourceError" ? result.failure.cause.message : result.failure.message,
        );
    }
    return problems.length > 0 ? yield* Effect.fail(new EnvInvalid({ problems })) : (out as Decoded<R>);
  });

/** What both entry points read, with the defaults of `node service/main.ts`. */
const shared = {
  nodeEnv: env.NODE_ENV,
  host: env.HOST.pipe(withDefault("127.0.0.1")),
  port: env.PORT.pipe(withDefault(4242)),
  logLevel: env.LOG_LEVEL.pipe(withDefault<LogLevel.LogLevel>("Info")),
  logFormat: env.LOG_FORMAT,
  chainsConfig: env.CHAINS_CONFIG.pipe(withDefault("config/chains.json")),
  databasePoolSize: env.DATABASE_POOL_SIZE.pipe(withDefault(20)),
  ponderUrl: env.PONDER_URL,
  publicUrl: env.PUBLIC_URL,
  relayerKey: env.RELAYER_PRIVATE_KEY,
  relayerBumpAfterSeconds: env.RELAYER_BUMP_AFTER_SECONDS.pipe(withDefault(30)),
  idempotencyRetentionHours: env.IDEMPOTENCY_RETENTION_HOURS.pipe(withDefault(24)),
  allowPrivateInTest: env.WEBHOOK_TEST_ALLOW_PRIVATE_URLS,
  webhookTimeoutSeconds: env.WEBHOOK_TIMEOUT_SECONDS.pipe(withDefault(10)),
  webhookMaxInFlight: env.WEBHOOK_MAX_IN_FLIGHT.pipe(withDefault(256)),
  webhookMaxInFlightPerEndpoint: env.WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT.pipe(withDefault(16)),
  pagePerAddress: env.PAGE_RATE_LIMIT_PER_ADDRESS.pipe(withDefault(PAGE_LIMIT_DEFAULTS.perAddressPerMinute)),
  pagePerToken: env.PAGE_RATE_LIMIT_PER_TOKEN.pipe(withDefault(PAGE_LIMIT_DEFAULTS.perTokenPerMinute)),
  trustProxy: env.TRUST_PROXY.pipe(withDefault(PAGE_LIMIT_DEFAULTS.trustProxy)),
  authorizationsPerMandatePerDay: env.AUTHORIZATIONS_PER_MANDATE_PER_DAY.pipe(
    withDefault(PAGE_LIMIT_DEFAULTS.authorizationsPerMandatePerDay),
  ),
  metricsToken: env.METRICS_TOKEN,
  indexerStallSeconds: env.INDEXER_STALL_SECONDS,
  apiRateLive: env.API_RATE_LIMIT_LIVE.pipe(withDefault(API_LIMIT_DEFAULTS.livePerSecond)),
  apiRateTest: env.API_RATE_LIMIT_TEST.pipe(withDefault(API_LIMIT_DEFAULTS.testPerSecond)),
  apiRateTestHelpers: env.API_RATE_LIMIT_TEST_HELPERS.pipe(
    withDefault(API_LIMIT_DEFAULTS.testHelpersPerSecond),
  ),
  openPaymentsPerChain: env.OPEN_PAYMENTS_PER_CHAIN.pipe(
    withDefault(API_LIMIT_DEFAULTS.openPaymentsPerChain),
  ),
};

type NodeEnv = "production" | "development" | "test";

const apiLimitsOf = (e: {
  readonly apiRateLive: number;
  readonly apiRateTest: number;
  readonly apiRateTestHelpers: number;
  readonly openPaymentsPerChain: number;
}): ApiLimitsConfig => ({
  livePerSecond: e.apiRateLive,
  testPerSecond: e.apiRateTest,
  testHelpersPerSecond: e.apiRateTestHelpers,
  openPaymentsPerChain: e.openPaymentsPerChain,
});

/**
 * The service alone runs as production unless told otherwise; only `npm start` (the local stack) runs
 * as development. NODE_ENV sets nothing but LOG_FORMAT's default: test-mode webhooks to private
 * addresses are the local stack's alone (or WEBHOOK_TEST_ALLOW_PRIVATE_URLS, said explicitly).
 */
const logFormatOf = (
  format: Option.Option<"json" | "pretty">,
  nodeEnv: Option.Option<NodeEnv>,
  fallback: NodeEnv,
): "json" | "pretty" =>
  Option.getOrElse(format, () =>
    Option.getOrElse(nodeEnv, () => fallback) === "production" ? "json" : "pretty",
  );

export const serviceConfigFromEnv: Effect.Effect<ServiceConfig, EnvInvalid> = decodeAll({
  ...shared,
  databaseUrl: env.DATABASE_URL.pipe(required("DATABASE_URL", "a postgres:// URL")),
  secretsKey: env.WEBHOOK_SECRETS_KEY.pipe(required("WEBHOOK_SECRETS_KEY", "32 bytes in base64")),
}).pipe(
  Effect.map((e) => ({
    host: e.host,
    port: e.port,
    databaseUrl: e.databaseUrl,
    databasePoolSize: e.databasePoolSize,
    chainsFile: e.chainsConfig,
    ponderUrl: Option.getOrUndefined(e.ponderUrl),
    logFormat: logFormatOf(e.logFormat, e.nodeEnv, "production"),
    logLevel: e.logLevel,
    idempotencyRetentionHours: e.idempotencyRetentionHours,
    relayerKey: Option.getOrUndefined(Option.map(e.relayerKey, (key) => Redacted.make(key as `0x${string}`))),
    relayerBumpAfterSeconds: e.relayerBumpAfterSeconds,
    publicUrl: Option.getOrUndefined(e.publicUrl),
    webhooks: {
      secretsKey: Redacted.make(e.secretsKey.trim()),
      allowPrivateInTest: Option.getOrElse(e.allowPrivateInTest, () => false),
      timeoutSeconds: e.webhookTimeoutSeconds,
      maxInFlight: e.webhookMaxInFlight,
      maxInFlightPerEndpoint: e.webhookMaxInFlightPerEndpoint,
    },
    page: {
      perAddressPerMinute: e.pagePerAddress,
      perTokenPerMinute: e.pagePerToken,
      trustProxy: e.trustProxy,
      authorizationsPerMandatePerDay: e.authorizationsPerMandatePerDay,
    },
    apiLimits: apiLimitsOf(e),
    metricsToken: Option.getOrUndefined(Option.map(e.metricsToken, (token) => Redacted.make(token))),
    indexerStallSeconds: Option.getOrElse(e.indexerStallSeconds, () => 60),
  })),
);

/**
 * The environment that `serviceConfigFromEnv` decodes back into `config`: how the local stack starts the
 * service as a process of its own (`node service/main.ts`), as a deployment runs it.
 */
export const serviceEnvOf = (config: ServiceConfig): Record<string, string> => {
  // What the config leaves unset stays unset: the decoder's defaults fill it, as for the service alone.
  const optional = (name: string, value: string | number | boolean | undefined) =>
    value === undefined ? {} : { [name]: String(value) };
  const { page, apiLimits } = config;
  return {
    HOST: config.host,
    PORT: String(config.port),
    DATABASE_URL: config.databaseUrl,
    DATABASE_POOL_SIZE: String(config.databasePoolSize),
    CHAINS_CONFIG: config.chainsFile,
    ...optional("PONDER_URL", config.ponderUrl),
    LOG_FORMAT: config.logFormat,
    LOG_LEVEL: config.logLevel.toLowerCase(),
    IDEMPOTENCY_RETENTION_HOURS: String(config.idempotencyRetentionHours),
    ...optional("RELAYER_PRIVATE_KEY", config.relayerKey && Redacted.value(config.relayerKey)),
    RELAYER_BUMP_AFTER_SECONDS: String(config.relayerBumpAfterSeconds),
    ...optional("PUBLIC_URL", config.publicUrl),
    WEBHOOK_SECRETS_KEY: Redacted.value(config.webhooks.secretsKey),
    WEBHOOK_TEST_ALLOW_PRIVATE_URLS: String(config.webhooks.allowPrivateInTest),
    WEBHOOK_TIMEOUT_SECONDS: String(config.webhooks.timeoutSeconds),
    WEBHOOK_MAX_IN_FLIGHT: String(config.webhooks.maxInFlight),
    WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT: String(config.webhooks.maxInFlightPerEndpoint),
    ...optional("PAGE_RATE_LIMIT_PER_ADDRESS", page?.perAddressPerMinute),
    ...optional("PAGE_RATE_LIMIT_PER_TOKEN", page?.perTokenPerMinute),
    ...optional("TRUST_PROXY", page?.trustProxy),
    ...optional("AUTHORIZATIONS_PER_MANDATE_PER_DAY", page?.authorizationsPerMandatePerDay),
    ...optional("METRICS_TOKEN", config.metricsToken && Redacted.value(config.metricsToken)),
    ...optional("INDEXER_STALL_SECONDS", config.indexerStallSeconds),
    ...optional("API_RATE_LIMIT_LIVE", apiLimits?.livePerSecond),
    ...optional("API_RATE_LIMIT_TEST", apiLimits?.testPerSecond),
    ...optional("API_RATE_LIMIT_TEST_HELPERS", apiLimits?.testHelpersPerSecond),
    ...optional("OPEN_PAYMENTS_PER_CHAIN", apiLimits?.openPaymentsPerChain),
  };
};

/** What `npm start` reads: the service's variables (Postgres and the key are optional there) and its own. */
export interface StackEnv {
  readonly port: number;
  readonly postgresPort: number;
  readonly dataDir: string;
  readonly chainsConfig: string;
  readonly databaseUrl: string | undefined;
  readonly devApiKey: string | undefined;
  /** RELAYER_PRIVATE_KEY; unset: anvil's account, which the stack allows only when every chain is local. */
  readonly relayerKey: `0x${string}` | undefined;
  readonly logFormat: "json" | "pretty";
  readonly logLevel: LogLevel.LogLevel;
  readonly verbose: boolean;
  /** LOCAL_CHAIN_SAVE_SECONDS: how often each local chain saves its state to the data directory. */
  readonly localChainSaveSeconds: number;
  /** METRICS_TOKEN; unset: the stack generates one per data directory. */
  readonly metricsToken: string | undefined;
  /** INDEXER_STALL_SECONDS; unset: the stack's own default. */
  readonly indexerStallSeconds: number | undefined;
  /** API_RATE_LIMIT_* and OPEN_PAYMENTS_PER_CHAIN, as the service alone reads them. */
  readonly apiLimits: ApiLimitsConfig;
}

export const stackEnvFromEnv: Effect.Effect<StackEnv, EnvInvalid> = decodeAll({
  ...shared,
  databaseUrl: env.DATABASE_URL,
  secretsKey: env.WEBHOOK_SECRETS_KEY,
  postgresPort: env.PG_PORT.pipe(withDefault(54329)),
  dataDir: env.DATA_DIR.pipe(withDefault(".data")),
  devApiKey: env.DEV_API_KEY,
  verbose: env.STACK_VERBOSE.pipe(withDefault<"0" | "1">("0")),
  localChainSaveSeconds: env.LOCAL_CHAIN_SAVE_SECONDS.pipe(withDefault(5)),
}).pipe(
  Effect.map((e) => ({
    port: e.port,
    postgresPort: e.postgresPort,
    dataDir: e.dataDir,
    chainsConfig: e.chainsConfig,
    databaseUrl: Option.getOrUndefined(e.databaseUrl),
    devApiKey: Option.getOrUndefined(e.devApiKey),
    relayerKey: Option.getOrUndefined(e.relayerKey) as `0x${string}` | undefined,
    logFormat: logFormatOf(e.logFormat, e.nodeEnv, "development"),
    logLevel: e.logLevel,
    verbose: e.verbose === "1",
    localChainSaveSeconds: e.localChainSaveSeconds,
    metricsToken: Option.getOrUndefined(e.metricsToken),
    indexerStallSeconds: Option.getOrUndefined(e.indexerStallSeconds),
    apiLimits: apiLimitsOf(e),
  })),
);
