/**
 * The environment, decoded once with the rules of every variable: the service process
 * (`serviceConfigFromEnv`) and the local stack (`stackEnvFromEnv`, for `npm start`) share them, and both
 * refuse to start on a bad value with one line per variable naming its rule. An empty value counts as
 * unset (Effect's env provider reads it so).
 */
import { existsSync } from "node:fs";
import { isIP } from "node:net";
import {
  Config,
  Effect,
  type LogLevel,
  Option,
  Redacted,
  Result,
  Schema,
  SchemaTransformation,
} from "effect";
import { SourceError } from "effect/ConfigProvider";
import { API_KEY_PATTERN } from "../auth/api-keys.ts";

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
  /** Public base URL of this service (authorization links); default: where it listens. */
  readonly publicUrl?: string | undefined;
  readonly webhooks: WebhookConfig;
  /** Limits of the public authorization page (default: see service/http/page-rate-limit.ts). */
  readonly page?: PageLimitsConfig;
  /** Bearer token of `GET /metrics`; none: the endpoint does not exist (404). */
  readonly metricsToken?: Redacted.Redacted<string> | undefined;
  /** A chain moving on while its indexed head stays put this long is stalled (default 60). */
  readonly indexerStallSeconds?: number;
}

export interface PageLimitsConfig {
  /** Requests per minute per client address and per authorization token; 0: unlimited. */
  readonly perAddressPerMinute: number;
  readonly perTokenPerMinute: number;
  /** Take the client address from X-Forwarded-For's right-most entry. */
  readonly trustProxy: boolean;
  /** Authorize transactions the relayer sends per mandate in a day. */
  readonly authorizationsPerMandatePerDay: number;
}

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

/**
 * One variable: its Schema (from the raw string) and the rule it states. A value that fails the Schema
 * fails with `NAME must be <rule>`; the raw value is shown unless the variable is a secret.
 */
const variable = <A>(
  name: string,
  rule: string,
  schema: Schema.Codec<A, string>,
  options: { readonly secret?: boolean } = {},
): Config.Config<Option.Option<A>> =>
  Config.String(name).pipe(
    Config.option,
    Config.mapEffect((raw) => {
      if (Option.isNone(raw)) return Effect.succeed(Option.none());
      const decoded = Schema.decodeUnknownOption(schema)(raw.value);
      if (Option.isSome(decoded)) return Effect.succeed(decoded);
      const got = options.secret ? "" : `, got ${JSON.stringify(raw.value.slice(0, 80))}`;
      return Effect.fail(
        new Config.ConfigError(new SourceError({ message: `${name} must be ${rule}${got}` })),
      );
    }),
  );

const withDefault =
  <A>(fallback: A) =>
  (config: Config.Config<Option.Option<A>>): Config.Config<A> =>
    config.pipe(Config.map(Option.getOrElse(() => fallback)));

const required =
  (name: string, rule: string) =>
  <A>(config: Config.Config<Option.Option<A>>): Config.Config<A> =>
    config.pipe(
      Config.mapEffect((value) =>
        Option.isSome(value)
          ? Effect.succeed(value.value)
          : Effect.fail(new Config.ConfigError(new SourceError({ message: `${name} must be set: ${rule}` }))),
      ),
    );

const matching = (pattern: RegExp) => Schema.String.check(Schema.isPattern(pattern));

const integer = (min: number, max: number) =>
  Schema.String.check(Schema.isPattern(/^\d{1,9}$/)).pipe(
    Schema.decodeTo(
      Schema.Int.check(Schema.isBetween({ minimum: min, maximum: max })),
      SchemaTransformation.transform({
        decode: (s: string) => Number.parseInt(s, 10),
        encode: (n: number) => String(n),
      }),
    ),
  );

/** `<protocol>//…` that parses as a URL (a Postgres URL may leave the host to `?host=/socket/dir`). */
const url = (protocols: readonly string[]) =>
  Schema.String.check(
    Schema.makeFilter(
      (s: string) =>
        URL.canParse(s) && protocols.some((protocol) => s.toLowerCase().startsWith(`${protocol}//`)),
    ),
  );

const oneOf = <const L extends readonly string[]>(values: L) => Schema.Literals(values);

const LOG_LEVELS = {
  all: "All",
  trace: "Trace",
  debug: "Debug",
  info: "Info",
  warn: "Warn",
  error: "Error",
  fatal: "Fatal",
  none: "None",
} as const satisfies Record<string, LogLevel.LogLevel>;

const logLevelSchema = Schema.String.pipe(
  Schema.decodeTo(
    Schema.Literals(Object.values(LOG_LEVELS)),
    SchemaTransformation.transform({
      decode: (s: string) =>
        LOG_LEVELS[s.toLowerCase() as keyof typeof LOG_LEVELS] ?? (s as LogLevel.LogLevel),
      encode: (level: LogLevel.LogLevel) => level.toLowerCase(),
    }),
  ),
);

const booleanSchema = Schema.Literals(["true", "false", "1", "0"]).pipe(
  Schema.decodeTo(
    Schema.Boolean,
    SchemaTransformation.transform({
      decode: (s: "true" | "false" | "1" | "0") => s === "true" || s === "1",
      encode: (b: boolean): "true" | "false" | "1" | "0" => (b ? "true" : "false"),
    }),
  ),
);

const hostSchema = Schema.String.check(
  Schema.makeFilter(
    (s: string) =>
      isIP(s) !== 0 ||
      /^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*$/.test(
        s,
      ),
  ),
);

const secretsKeySchema = Schema.String.check(
  Schema.makeFilter(
    (s: string) => /^[A-Za-z0-9+/]{43}=$/.test(s.trim()) && Buffer.from(s.trim(), "base64").length === 32,
  ),
);

/** The rules, by variable. Each is an optional value here; the entry points give defaults or require it. */
export const env = {
  NODE_ENV: variable(
    "NODE_ENV",
    "one of production, development, test",
    oneOf(["production", "development", "test"]),
  ),
  HOST: variable("HOST", "an IP address or a host name", hostSchema),
  PORT: variable("PORT", "a port number (0-65535; 0: any free port)", integer(0, 65_535)),
  PG_PORT: variable("PG_PORT", "a port number (1-65535)", integer(1, 65_535)),
  LOG_LEVEL: variable(
    "LOG_LEVEL",
    "one of trace, debug, info, warn, error, fatal, all, none",
    logLevelSchema,
  ),
  LOG_FORMAT: variable("LOG_FORMAT", "json or pretty", oneOf(["json", "pretty"])),
  DATA_DIR: variable("DATA_DIR", "a directory path (not blank)", matching(/\S/)),
  CHAINS_CONFIG: variable(
    "CHAINS_CONFIG",
    "the path of an existing chain config file",
    Schema.String.check(Schema.makeFilter((path: string) => existsSync(path))),
  ),
  DATABASE_URL: variable(
    "DATABASE_URL",
    "a postgres:// URL (postgres://user:password@host:port/database)",
    url(["postgres:", "postgresql:"]),
    { secret: true },
  ),
  DATABASE_POOL_SIZE: variable("DATABASE_POOL_SIZE", "an integer from 1 to 500", integer(1, 500)),
  PONDER_URL: variable("PONDER_URL", "an http(s) URL", url(["http:", "https:"])),
  PUBLIC_URL: variable("PUBLIC_URL", "an http(s) URL", url(["http:", "https:"])),
  DEV_API_KEY: variable(
    "DEV_API_KEY",
    "sk_test_ followed by 20-64 letters or digits",
    Schema.String.check(
      Schema.makeFilter((s: string) => s.startsWith("sk_test_") && API_KEY_PATTERN.test(s)),
    ),
    { secret: true },
  ),
  WEBHOOK_SECRETS_KEY: variable(
    "WEBHOOK_SECRETS_KEY",
    `32 bytes in base64 (44 characters); generate one with: node -e "console.log(crypto.randomBytes(32).toString('base64'))"`,
    secretsKeySchema,
    { secret: true },
  ),
  RELAYER_PRIVATE_KEY: variable(
    "RELAYER_PRIVATE_KEY",
    "0x followed by 64 hex digits (a 32-byte private key)",
    matching(/^0x[0-9a-fA-F]{64}$/),
    { secret: true },
  ),
  RELAYER_BUMP_AFTER_SECONDS: variable(
    "RELAYER_BUMP_AFTER_SECONDS",
    "an integer from 1 to 3600",
    integer(1, 3_600),
  ),
  IDEMPOTENCY_RETENTION_HOURS: variable(
    "IDEMPOTENCY_RETENTION_HOURS",
    "an integer from 1 to 8760 (a year)",
    integer(1, 8_760),
  ),
  WEBHOOK_TEST_ALLOW_PRIVATE_URLS: variable(
    "WEBHOOK_TEST_ALLOW_PRIVATE_URLS",
    "true, false, 1 or 0",
    booleanSchema,
  ),
  WEBHOOK_TIMEOUT_SECONDS: variable("WEBHOOK_TIMEOUT_SECONDS", "an integer from 1 to 120", integer(1, 120)),
  WEBHOOK_MAX_IN_FLIGHT: variable("WEBHOOK_MAX_IN_FLIGHT", "an integer from 1 to 10000", integer(1, 10_000)),
  WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT: variable(
    "WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT",
    "an integer from 1 to 1000",
    integer(1, 1_000),
  ),
  STACK_VERBOSE: variable("STACK_VERBOSE", "1 or 0", oneOf(["1", "0"])),
  METRICS_TOKEN: variable(
    "METRICS_TOKEN",
    "16 to 256 printable ASCII characters without spaces",
    matching(/^[\x21-\x7e]{16,256}$/),
    { secret: true },
  ),
  INDEXER_STALL_SECONDS: variable("INDEXER_STALL_SECONDS", "an integer from 5 to 3600", integer(5, 3_600)),
  PAGE_RATE_LIMIT_PER_ADDRESS: variable(
    "PAGE_RATE_LIMIT_PER_ADDRESS",
    "an integer from 0 (unlimited) to 1000000",
    integer(0, 1_000_000),
  ),
  PAGE_RATE_LIMIT_PER_TOKEN: variable(
    "PAGE_RATE_LIMIT_PER_TOKEN",
    "an integer from 0 (unlimited) to 1000000",
    integer(0, 1_000_000),
  ),
  TRUST_PROXY: variable("TRUST_PROXY", "true, false, 1 or 0", booleanSchema),
  AUTHORIZATIONS_PER_MANDATE_PER_DAY: variable(
    "AUTHORIZATIONS_PER_MANDATE_PER_DAY",
    "an integer from 1 to 1000",
    integer(1, 1_000),
  ),
} as const;

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
  nodeEnv: env.NODE_ENV.pipe(withDefault<"production" | "development" | "test">("development")),
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
  pagePerAddress: env.PAGE_RATE_LIMIT_PER_ADDRESS.pipe(withDefault(600)),
  pagePerToken: env.PAGE_RATE_LIMIT_PER_TOKEN.pipe(withDefault(240)),
  trustProxy: env.TRUST_PROXY.pipe(withDefault(false)),
  authorizationsPerMandatePerDay: env.AUTHORIZATIONS_PER_MANDATE_PER_DAY.pipe(withDefault(5)),
  metricsToken: env.METRICS_TOKEN,
  indexerStallSeconds: env.INDEXER_STALL_SECONDS,
};

const logFormatOf = (format: Option.Option<"json" | "pretty">, nodeEnv: string): "json" | "pretty" =>
  Option.getOrElse(format, () => (nodeEnv === "production" ? "json" : "pretty"));

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
    logFormat: logFormatOf(e.logFormat, e.nodeEnv),
    logLevel: e.logLevel,
    idempotencyRetentionHours: e.idempotencyRetentionHours,
    relayerKey: Option.getOrUndefined(Option.map(e.relayerKey, (key) => Redacted.make(key as `0x${string}`))),
    relayerBumpAfterSeconds: e.relayerBumpAfterSeconds,
    publicUrl: Option.getOrUndefined(e.publicUrl),
    webhooks: {
      secretsKey: Redacted.make(e.secretsKey.trim()),
      allowPrivateInTest: Option.getOrElse(e.allowPrivateInTest, () => e.nodeEnv !== "production"),
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
    metricsToken: Option.getOrUndefined(Option.map(e.metricsToken, (token) => Redacted.make(token))),
    indexerStallSeconds: Option.getOrElse(e.indexerStallSeconds, () => 60),
  })),
);

/** What `npm start` reads: the service's variables (Postgres and the key are optional there) and its own. */
export interface StackEnv {
  readonly port: number;
  readonly postgresPort: number;
  readonly dataDir: string;
  readonly chainsConfig: string;
  readonly databaseUrl: string | undefined;
  readonly devApiKey: string | undefined;
  readonly logFormat: "json" | "pretty";
  readonly logLevel: LogLevel.LogLevel;
  readonly verbose: boolean;
  /** METRICS_TOKEN; unset: the stack generates one per data directory. */
  readonly metricsToken: string | undefined;
  /** INDEXER_STALL_SECONDS; unset: the stack's own default. */
  readonly indexerStallSeconds: number | undefined;
}

export const stackEnvFromEnv: Effect.Effect<StackEnv, EnvInvalid> = decodeAll({
  ...shared,
  databaseUrl: env.DATABASE_URL,
  secretsKey: env.WEBHOOK_SECRETS_KEY,
  postgresPort: env.PG_PORT.pipe(withDefault(54329)),
  dataDir: env.DATA_DIR.pipe(withDefault(".data")),
  devApiKey: env.DEV_API_KEY,
  verbose: env.STACK_VERBOSE.pipe(withDefault<"0" | "1">("0")),
}).pipe(
  Effect.map((e) => ({
    port: e.port,
    postgresPort: e.postgresPort,
    dataDir: e.dataDir,
    chainsConfig: e.chainsConfig,
    databaseUrl: Option.getOrUndefined(e.databaseUrl),
    devApiKey: Option.getOrUndefined(e.devApiKey),
    logFormat: logFormatOf(e.logFormat, e.nodeEnv),
    logLevel: e.logLevel,
    verbose: e.verbose === "1",
    metricsToken: Option.getOrUndefined(e.metricsToken),
    indexerStallSeconds: Option.getOrUndefined(e.indexerStallSeconds),
  })),
);
