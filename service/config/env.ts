/** The service's configuration, read from the environment and decoded (a bad value fails the start). */
import { Config, Effect, type LogLevel, Option, type Redacted } from "effect";

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

export const serviceConfigFromEnv: Effect.Effect<ServiceConfig, Config.ConfigError> = Effect.gen(
  function* () {
    const production =
      (yield* Config.String("NODE_ENV").pipe(Config.withDefault("development"))) === "production";
    return {
      host: yield* Config.String("HOST").pipe(Config.withDefault("127.0.0.1")),
      port: yield* Config.Port("PORT").pipe(Config.withDefault(4242)),
      databaseUrl: yield* Config.String("DATABASE_URL"),
      databasePoolSize: yield* Config.Int("DATABASE_POOL_SIZE").pipe(Config.withDefault(20)),
      chainsFile: yield* Config.String("CHAINS_CONFIG").pipe(Config.withDefault("config/chains.json")),
      ponderUrl: yield* Config.String("PONDER_URL").pipe(Config.option, Config.map(Option.getOrUndefined)),
      logFormat: yield* Config.Literals(["json", "pretty"], "LOG_FORMAT").pipe(
        Config.withDefault(production ? "json" : "pretty"),
      ),
      logLevel: yield* Config.LogLevel("LOG_LEVEL").pipe(Config.withDefault("Info")),
      idempotencyRetentionHours: yield* Config.Int("IDEMPOTENCY_RETENTION_HOURS").pipe(
        Config.withDefault(24),
      ),
      relayerKey: yield* Config.Redacted("RELAYER_PRIVATE_KEY").pipe(
        Config.option,
        Config.map((key) => Option.getOrUndefined(key) as Redacted.Redacted<`0x${string}`> | undefined),
      ),
      relayerBumpAfterSeconds: yield* Config.Int("RELAYER_BUMP_AFTER_SECONDS").pipe(Config.withDefault(30)),
      publicUrl: yield* Config.String("PUBLIC_URL").pipe(Config.option, Config.map(Option.getOrUndefined)),
      webhooks: {
        secretsKey: yield* Config.Redacted("WEBHOOK_SECRETS_KEY"),
        allowPrivateInTest: yield* Config.Boolean("WEBHOOK_TEST_ALLOW_PRIVATE_URLS").pipe(
          Config.withDefault(!production),
        ),
        timeoutSeconds: yield* Config.Int("WEBHOOK_TIMEOUT_SECONDS").pipe(Config.withDefault(10)),
        maxInFlight: yield* Config.Int("WEBHOOK_MAX_IN_FLIGHT").pipe(Config.withDefault(256)),
        maxInFlightPerEndpoint: yield* Config.Int("WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT").pipe(
          Config.withDefault(16),
        ),
      },
    };
  },
);
