/**
 * The environment's rules (service/config/env.ts), shared by `npm start` and `node service/main.ts`:
 * each bad value is refused with a message naming the variable and its rule; good values decode.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createConnection } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ConfigProvider, Effect, Redacted } from "effect";
import { describe, expect, it } from "vitest";
import { freePort } from "../../scripts/stack/wait.ts";
import {
  type EnvInvalid,
  PAGE_LIMIT_DEFAULTS,
  type ServiceConfig,
  serviceConfigFromEnv,
  serviceEnvOf,
  stackEnvFromEnv,
} from "../../service/config/env.ts";

const SECRETS_KEY = Buffer.alloc(32, 7).toString("base64");
const SERVICE_BASE = {
  DATABASE_URL: "postgres://u:p@127.0.0.1:5432/billing",
  WEBHOOK_SECRETS_KEY: SECRETS_KEY,
};

const withEnv = <A>(effect: Effect.Effect<A, EnvInvalid>, env: Record<string, string>) =>
  effect.pipe(Effect.provideService(ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env })));

const problems = (effect: Effect.Effect<unknown, EnvInvalid>, env: Record<string, string>) =>
  Effect.runSync(
    withEnv(effect, env).pipe(
      Effect.flip,
      Effect.map((e) => e.problems),
    ),
  );

const stackProblems = (env: Record<string, string>) => problems(stackEnvFromEnv, env);
const serviceProblems = (env: Record<string, string>) =>
  problems(serviceConfigFromEnv, { ...SERVICE_BASE, ...env });

describe("environment rules", () => {
  it("decodes an empty environment to the stack's defaults", () => {
    expect(Effect.runSync(withEnv(stackEnvFromEnv, {}))).toEqual({
      port: 4242,
      postgresPort: 54329,
      dataDir: ".data",
      chainsConfig: "config/chains.json",
      databaseUrl: undefined,
      devApiKey: undefined,
      relayerKey: undefined,
      logFormat: "pretty",
      logLevel: "Info",
      verbose: false,
      localChainSaveSeconds: 5,
      apiLimits: {
        livePerSecond: 100,
        testPerSecond: 25,
        testHelpersPerSecond: 10,
        openPaymentsPerChain: 10_000,
      },
    });
  });

  it("decodes good values for the service", () => {
    const config = Effect.runSync(
      withEnv(serviceConfigFromEnv, {
        ...SERVICE_BASE,
        NODE_ENV: "production",
        HOST: "0.0.0.0",
        PORT: "0",
        LOG_LEVEL: "DEBUG",
        DATABASE_POOL_SIZE: "50",
        IDEMPOTENCY_RETENTION_HOURS: "48",
        RELAYER_PRIVATE_KEY: `0x${"ab".repeat(32)}`,
        RELAYER_BUMP_AFTER_SECONDS: "60",
        PUBLIC_URL: "https://pay.example",
        PONDER_URL: "http://127.0.0.1:42069",
        WEBHOOK_TIMEOUT_SECONDS: "5",
        WEBHOOK_MAX_IN_FLIGHT: "100",
        WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT: "4",
        CHAINS_CONFIG: "config/chains.json",
        API_RATE_LIMIT_LIVE: "500",
        API_RATE_LIMIT_TEST: "0",
        API_RATE_LIMIT_TEST_HELPERS: "3",
        OPEN_PAYMENTS_PER_CHAIN: "250",
      }),
    );
    expect(config).toMatchObject({
      host: "0.0.0.0",
      port: 0,
      logFormat: "json",
      logLevel: "Debug",
      databasePoolSize: 50,
      idempotencyRetentionHours: 48,
      relayerBumpAfterSeconds: 60,
      publicUrl: "https://pay.example",
      ponderUrl: "http://127.0.0.1:42069",
      webhooks: { allowPrivateInTest: false, timeoutSeconds: 5, maxInFlight: 100, maxInFlightPerEndpoint: 4 },
      apiLimits: { livePerSecond: 500, testPerSecond: 0, testHelpersPerSecond: 3, openPaymentsPerChain: 250 },
    });
    expect(Redacted.value(config.webhooks.secretsKey)).toBe(SECRETS_KEY);
    expect(config.relayerKey && Redacted.value(config.relayerKey)).toBe(`0x${"ab".repeat(32)}`);
    // Safe by default: the service alone runs as production (JSON logs, no test webhooks to private
    // addresses), whatever NODE_ENV says; only the explicit variable opens private addresses to test mode.
    const plain = Effect.runSync(withEnv(serviceConfigFromEnv, SERVICE_BASE));
    expect(plain.webhooks.allowPrivateInTest).toBe(false);
    expect(plain.logFormat).toBe("json");
    const development = Effect.runSync(
      withEnv(serviceConfigFromEnv, { ...SERVICE_BASE, NODE_ENV: "development" }),
    );
    expect(development.webhooks.allowPrivateInTest).toBe(false);
    expect(development.logFormat).toBe("pretty");
    const opened = Effect.runSync(
      withEnv(serviceConfigFromEnv, { ...SERVICE_BASE, WEBHOOK_TEST_ALLOW_PRIVATE_URLS: "true" }),
    );
    expect(opened.webhooks.allowPrivateInTest).toBe(true);
    for (const databaseUrl of [
      "postgresql://u@db.internal/billing",
      "postgres:///billing?host=/var/run/postgresql",
    ])
      expect(
        Effect.runSync(withEnv(serviceConfigFromEnv, { ...SERVICE_BASE, DATABASE_URL: databaseUrl }))
          .databaseUrl,
      ).toBe(databaseUrl);
  });

  it("decodes the environment the local stack gives a service process back into its config", () => {
    /** The config with its secrets opened, to compare by value. */
    const opened = (config: ServiceConfig) => ({
      ...config,
      relayerKey: config.relayerKey && Redacted.value(config.relayerKey),
      metricsToken: config.metricsToken && Redacted.value(config.metricsToken),
      webhooks: { ...config.webhooks, secretsKey: Redacted.value(config.webhooks.secretsKey) },
    });
    const full: ServiceConfig = {
      host: "127.0.0.1",
      port: 40123,
      databaseUrl: "postgres://u:p@127.0.0.1:5432/billing",
      databasePoolSize: 20,
      chainsFile: "config/chains.json",
      ponderUrl: "http://127.0.0.1:42069",
      logFormat: "json",
      logLevel: "Error",
      idempotencyRetentionHours: 24,
      relayerKey: Redacted.make(`0x${"ab".repeat(32)}` as const),
      relayerBumpAfterSeconds: 30,
      publicUrl: "https://pay.example",
      webhooks: {
        secretsKey: Redacted.make(SECRETS_KEY),
        allowPrivateInTest: true,
        timeoutSeconds: 10,
        maxInFlight: 256,
        maxInFlightPerEndpoint: 16,
      },
      page: {
        perAddressPerMinute: 0,
        perTokenPerMinute: 30,
        trustProxy: true,
        authorizationsPerMandatePerDay: 2,
      },
      apiLimits: {
        livePerSecond: 0,
        testPerSecond: 25,
        testHelpersPerSecond: 10,
        openPaymentsPerChain: 10_000,
      },
      metricsToken: Redacted.make("scrape-token-0123456789"),
      indexerStallSeconds: 20,
    };
    const decode = (config: ServiceConfig) =>
      opened(Effect.runSync(withEnv(serviceConfigFromEnv, serviceEnvOf(config))));
    expect(decode(full)).toEqual(opened(full));
    // Without the optional parts: the defaults the service alone would take.
    const { publicUrl: _, page: __, metricsToken: ___, ...bare } = full;
    expect(decode({ ...bare, ponderUrl: undefined, relayerKey: undefined })).toEqual({
      ...opened({ ...bare, ponderUrl: undefined, relayerKey: undefined }),
      publicUrl: undefined,
      metricsToken: undefined,
      page: PAGE_LIMIT_DEFAULTS,
    });
  });

  it("refuses a DEV_API_KEY that is not a test key of the key format, without echoing it", () => {
    for (const key of [
      "sk_test_bars1795390668",
      "sk_live_0123456789abcdefghijKLMN",
      "sk_test_has-dash0123456789abcdef",
    ]) {
      expect(stackProblems({ DEV_API_KEY: key })).toEqual([
        "DEV_API_KEY must be sk_test_ followed by 20-64 letters or digits",
      ]);
    }
    expect(stackProblems({ DEV_API_KEY: `sk_test_${"a".repeat(65)}` })).toHaveLength(1);
    expect(
      Effect.runSync(withEnv(stackEnvFromEnv, { DEV_API_KEY: `sk_test_${"a1".repeat(10)}` })).devApiKey,
    ).toBe(`sk_test_${"a1".repeat(10)}`);
  });

  it.each([
    ["PORT", "65536", 'PORT must be a port number (0-65535; 0: any free port), got "65536"'],
    ["PORT", "80a", 'PORT must be a port number (0-65535; 0: any free port), got "80a"'],
    ["PORT", "-1", 'PORT must be a port number (0-65535; 0: any free port), got "-1"'],
    ["PG_PORT", "0", 'PG_PORT must be a port number (1-65535), got "0"'],
    [
      "LOG_LEVEL",
      "verbose",
      'LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, all, none, got "verbose"',
    ],
    ["LOG_FORMAT", "xml", 'LOG_FORMAT must be json or pretty, got "xml"'],
    ["DATA_DIR", "   ", 'DATA_DIR must be a directory path (not blank), got "   "'],
    [
      "CHAINS_CONFIG",
      "config/nope.json",
      'CHAINS_CONFIG must be the path of an existing chain config file, got "config/nope.json"',
    ],
    ["STACK_VERBOSE", "yes", 'STACK_VERBOSE must be 1 or 0, got "yes"'],
    ["LOCAL_CHAIN_SAVE_SECONDS", "0", 'LOCAL_CHAIN_SAVE_SECONDS must be an integer from 1 to 3600, got "0"'],
    ["NODE_ENV", "prod", 'NODE_ENV must be one of production, development, test, got "prod"'],
    ["HOST", "local host", 'HOST must be an IP address or a host name, got "local host"'],
  ])("refuses %s=%j in npm start", (name, value, message) => {
    expect(stackProblems({ [name]: value })).toEqual([message]);
  });

  it.each([
    [
      "DATABASE_URL",
      "mysql://u@127.0.0.1/x",
      "DATABASE_URL must be a postgres:// URL (postgres://user:password@host:port/database)",
    ],
    [
      "DATABASE_URL",
      "postgres:billing",
      "DATABASE_URL must be a postgres:// URL (postgres://user:password@host:port/database)",
    ],
    [
      "DATABASE_URL",
      "not a url",
      "DATABASE_URL must be a postgres:// URL (postgres://user:password@host:port/database)",
    ],
    [
      "RELAYER_PRIVATE_KEY",
      `0x${"ab".repeat(31)}`,
      "RELAYER_PRIVATE_KEY must be 0x followed by 64 hex digits (a 32-byte private key)",
    ],
    ["PUBLIC_URL", "ftp://pay.example", 'PUBLIC_URL must be an http(s) URL, got "ftp://pay.example"'],
    ["PONDER_URL", "127.0.0.1:42069", 'PONDER_URL must be an http(s) URL, got "127.0.0.1:42069"'],
    [
      "IDEMPOTENCY_RETENTION_HOURS",
      "0",
      'IDEMPOTENCY_RETENTION_HOURS must be an integer from 1 to 8760 (a year), got "0"',
    ],
    [
      "IDEMPOTENCY_RETENTION_HOURS",
      "8761",
      'IDEMPOTENCY_RETENTION_HOURS must be an integer from 1 to 8760 (a year), got "8761"',
    ],
    [
      "IDEMPOTENCY_RETENTION_HOURS",
      "1.5",
      'IDEMPOTENCY_RETENTION_HOURS must be an integer from 1 to 8760 (a year), got "1.5"',
    ],
    [
      "RELAYER_BUMP_AFTER_SECONDS",
      "0",
      'RELAYER_BUMP_AFTER_SECONDS must be an integer from 1 to 3600, got "0"',
    ],
    ["DATABASE_POOL_SIZE", "501", 'DATABASE_POOL_SIZE must be an integer from 1 to 500, got "501"'],
    ["WEBHOOK_TIMEOUT_SECONDS", "0", 'WEBHOOK_TIMEOUT_SECONDS must be an integer from 1 to 120, got "0"'],
    [
      "WEBHOOK_MAX_IN_FLIGHT",
      "10001",
      'WEBHOOK_MAX_IN_FLIGHT must be an integer from 1 to 10000, got "10001"',
    ],
    [
      "WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT",
      "x",
      'WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT must be an integer from 1 to 1000, got "x"',
    ],
    [
      "WEBHOOK_TEST_ALLOW_PRIVATE_URLS",
      "maybe",
      'WEBHOOK_TEST_ALLOW_PRIVATE_URLS must be true, false, 1 or 0, got "maybe"',
    ],
    [
      "API_RATE_LIMIT_LIVE",
      "-1",
      'API_RATE_LIMIT_LIVE must be an integer from 0 (unlimited) to 1000000, got "-1"',
    ],
    [
      "API_RATE_LIMIT_TEST",
      "2.5",
      'API_RATE_LIMIT_TEST must be an integer from 0 (unlimited) to 1000000, got "2.5"',
    ],
    [
      "API_RATE_LIMIT_TEST_HELPERS",
      "1000001",
      'API_RATE_LIMIT_TEST_HELPERS must be an integer from 0 (unlimited) to 1000000, got "1000001"',
    ],
    [
      "OPEN_PAYMENTS_PER_CHAIN",
      "many",
      'OPEN_PAYMENTS_PER_CHAIN must be an integer from 0 (unlimited) to 10000000, got "many"',
    ],
  ])("refuses %s=%j in the service", (name, value, message) => {
    expect(serviceProblems({ [name]: value })).toEqual([message]);
  });

  it("refuses a WEBHOOK_SECRETS_KEY that is not 32 bytes of base64, in both entry points", () => {
    const rule =
      "WEBHOOK_SECRETS_KEY must be 32 bytes in base64 (44 characters); generate one with: node -e \"console.log(crypto.randomBytes(32).toString('base64'))\"";
    for (const key of [
      Buffer.alloc(31).toString("base64"),
      Buffer.alloc(33).toString("base64"),
      `${"!".repeat(43)}=`,
    ]) {
      expect(serviceProblems({ WEBHOOK_SECRETS_KEY: key })).toEqual([rule]);
      expect(stackProblems({ WEBHOOK_SECRETS_KEY: key })).toEqual([rule]);
    }
  });

  it("requires DATABASE_URL and WEBHOOK_SECRETS_KEY for the service alone, and lists every problem at once", () => {
    expect(problems(serviceConfigFromEnv, { PORT: "x" })).toEqual([
      'PORT must be a port number (0-65535; 0: any free port), got "x"',
      "DATABASE_URL must be set: a postgres:// URL",
      "WEBHOOK_SECRETS_KEY must be set: 32 bytes in base64",
    ]);
  });

  it("makes `node service/main.ts` exit non-zero with the rule before connecting anywhere", () => {
    const run = spawnSync(process.execPath, ["service/main.ts"], {
      env: { ...process.env, ...SERVICE_BASE, DATABASE_POOL_SIZE: "0" },
      encoding: "utf8",
      timeout: 30_000,
    });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain("DATABASE_POOL_SIZE must be an integer from 1 to 500");
  });

  it("makes `npm start` exit non-zero with the rule before it starts anything", async () => {
    const parent = mkdtempSync(join(tmpdir(), "env-refused-"));
    const dataDir = join(parent, "data");
    const pgPort = await freePort();
    const started = performance.now();
    const run = spawnSync(process.execPath, ["scripts/start.ts"], {
      env: {
        ...process.env,
        DATA_DIR: dataDir,
        PG_PORT: String(pgPort),
        PORT: "0",
        DEV_API_KEY: "sk_test_bars1795390668",
      },
      encoding: "utf8",
      timeout: 30_000,
    });
    const elapsed = performance.now() - started;
    try {
      expect(run.status).toBe(2);
      expect(run.stderr).toContain("DEV_API_KEY must be sk_test_ followed by 20-64 letters or digits");
      expect(run.stderr).not.toContain("bars1795390668");
      expect(run.stdout).not.toContain("Starting");
      // Nothing started: no data directory, no database listening on its port.
      expect(existsSync(dataDir)).toBe(false);
      expect(readdirSync(parent)).toEqual([]);
      const listening = await new Promise<boolean>((resolve) => {
        const socket = createConnection({ host: "127.0.0.1", port: pgPort });
        socket.once("connect", () => {
          socket.destroy();
          resolve(true);
        });
        socket.once("error", () => resolve(false));
      });
      expect(listening).toBe(false);
      expect(elapsed).toBeLessThan(15_000);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });
  it("makes `npm start` refuse anvil's key for a chain that is not local: RELAYER_PRIVATE_KEY must be set", async () => {
    const parent = mkdtempSync(join(tmpdir(), "relayer-refused-"));
    const chainsConfig = join(parent, "chains.json");
    writeFileSync(
      chainsConfig,
      JSON.stringify({
        chains: [
          {
            id: 8453,
            name: "Base",
            livemode: true,
            rpc: { http: ["http://127.0.0.1:9"] },
            native_currency: { name: "Ether", symbol: "ETH", decimals: 18 },
            escrow: { address: `0x${"11".repeat(20)}`, start_block: 1 },
            tokens: [],
            subscriptions_available: true,
            payments_available: true,
            escrow_available: true,
            hold_seconds: 0,
            confirmations: 3,
          },
        ],
      }),
    );
    const pgPort = await freePort();
    const run = spawnSync(process.execPath, ["scripts/start.ts"], {
      env: {
        ...process.env,
        DATA_DIR: join(parent, "data"),
        CHAINS_CONFIG: chainsConfig,
        PG_PORT: String(pgPort),
        PORT: "0",
        RELAYER_PRIVATE_KEY: "",
      },
      encoding: "utf8",
      timeout: 30_000,
    });
    try {
      expect(run.status, run.stdout + run.stderr).toBe(1);
      expect(run.stderr).toContain(
        "Start failed: RELAYER_PRIVATE_KEY must be set: chain 8453 is not local, and anvil's keys are public",
      );
      // Refused before Postgres started.
      expect(existsSync(join(parent, "data", "postgres"))).toBe(false);
    } finally {
      rmSync(parent, { recursive: true, force: true });
    }
  });
});
