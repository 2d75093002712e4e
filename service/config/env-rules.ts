/**
 * The rule of every environment variable: a Schema from the raw string and the rule a bad value is told.
 * Each is an optional value here; the entry points (env.ts) give defaults or require it.
 */
import { existsSync } from "node:fs";
import { isIP } from "node:net";
import { Config, Effect, type LogLevel, Option, Schema, SchemaTransformation } from "effect";
import { SourceError } from "effect/ConfigProvider";
import { API_KEY_PATTERN } from "../auth/api-keys.ts";

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

export const withDefault =
  <A>(fallback: A) =>
  (config: Config.Config<Option.Option<A>>): Config.Config<A> =>
    config.pipe(Config.map(Option.getOrElse(() => fallback)));

export const required =
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

/** A private key in the named variable: RELAYER_PRIVATE_KEY, or one a chain's `relayer.key_env` names. */
export const privateKeyVariable = (name: string) =>
  variable(name, "0x followed by 64 hex digits (a 32-byte private key)", matching(/^0x[0-9a-fA-F]{64}$/), {
    secret: true,
  });

/** A secret in the named variable (a chain's `relayer.password_env`: its keystore's password). */
export const secretVariable = (name: string) => variable(name, "a string", Schema.String, { secret: true });

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
  RELAYER_PRIVATE_KEY: privateKeyVariable("RELAYER_PRIVATE_KEY"),
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
  LOCAL_CHAIN_SAVE_SECONDS: variable(
    "LOCAL_CHAIN_SAVE_SECONDS",
    "an integer from 1 to 3600",
    integer(1, 3_600),
  ),
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
  API_RATE_LIMIT_LIVE: variable(
    "API_RATE_LIMIT_LIVE",
    "an integer from 0 (unlimited) to 1000000",
    integer(0, 1_000_000),
  ),
  API_RATE_LIMIT_TEST: variable(
    "API_RATE_LIMIT_TEST",
    "an integer from 0 (unlimited) to 1000000",
    integer(0, 1_000_000),
  ),
  API_RATE_LIMIT_TEST_HELPERS: variable(
    "API_RATE_LIMIT_TEST_HELPERS",
    "an integer from 0 (unlimited) to 1000000",
    integer(0, 1_000_000),
  ),
  OPEN_PAYMENTS_PER_CHAIN: variable(
    "OPEN_PAYMENTS_PER_CHAIN",
    "an integer from 0 (unlimited) to 10000000",
    integer(0, 10_000_000),
  ),
  AUTHORIZATIONS_PER_MANDATE_PER_DAY: variable(
    "AUTHORIZATIONS_PER_MANDATE_PER_DAY",
    "an integer from 1 to 1000",
    integer(1, 1_000),
  ),
} as const;
