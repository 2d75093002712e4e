/**
 * The Ponder indexer as a child process. Its database schema is named after a hash of everything
 * in its build (config, schema, src/ indexing files, resolved chains): unchanged code resumes where
 * it stopped; changed code indexes into a fresh schema. The views schema keeps one stable name.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { PgClient } from "@effect/sql-pg";
import { Effect, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import { ONCHAIN_SCHEMA } from "../../service/db/client.ts";
import { ROOT } from "../contracts/compile.ts";
import { stopChild, supervise, untilReady } from "./processes.ts";
import { waitFor } from "./wait.ts";

const indexingFiles = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return path === join(ROOT, "src", "api") ? [] : indexingFiles(path);
    return /\.(ts|js|mts|mjs)$/.test(entry.name) && !/\.(test|spec)\./.test(entry.name) ? [path] : [];
  });

/** `ponder_<12 hex>`: a function of what Ponder hashes into its build id, plus the resolved chains. */
export const ponderSchemaName = (resolvedChainsJson: string): string => {
  const hash = createHash("sha256").update(resolvedChainsJson);
  for (const file of ["ponder.config.ts", "ponder.schema.ts"]) hash.update(readFileSync(join(ROOT, file)));
  for (const file of indexingFiles(join(ROOT, "src")).sort())
    hash.update(relative(ROOT, file)).update(readFileSync(file));
  return `ponder_${hash.digest("hex").slice(0, 12)}`;
};

const withoutPort = (env: NodeJS.ProcessEnv): NodeJS.ProcessEnv => {
  const { PORT: _port, DATABASE_PRIVATE_URL: _private, DATABASE_SCHEMA: _schema, ...rest } = env;
  return rest;
};

/**
 * Ponder 0.17.7 leaves its schema marked locked after a clean SIGTERM, so an immediate restart waits
 * out the 25 s lock timeout. When the stack owns the database (embedded Postgres) and has stopped the
 * previous indexer itself, no other app can hold the lock: release it.
 */
export const releaseStaleLock = (databaseUrl: string, schema: string): Promise<void> =>
  Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const exists =
        yield* sql`SELECT 1 FROM information_schema.tables WHERE table_schema = ${schema} AND table_name = '_ponder_meta'`;
      if (exists.length === 0) return;
      yield* sql`UPDATE ${sql(schema)}._ponder_meta SET value = jsonb_set(value, '{is_locked}', '0'::jsonb) WHERE key = 'app'`;
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 }))),
  );

export interface RunningPonder {
  readonly url: string;
  readonly schema: string;
  readonly pid: number;
  stop(): Promise<void>;
}

const ready = async (url: string) => {
  try {
    return (await fetch(`${url}/ready`)).status === 200;
  } catch {
    return false;
  }
};

export const startPonder = async (options: {
  readonly databaseUrl: string;
  readonly chainsFile: string;
  readonly schema: string;
  readonly port: number;
  readonly logFormat: "json" | "pretty";
  readonly onOutput: (line: string) => void;
  readonly readyTimeoutMs?: number;
  /** Stops waiting for the indexer, and stops it, when aborted. */
  readonly signal?: AbortSignal | undefined;
}): Promise<RunningPonder> => {
  const bin = join(ROOT, "node_modules", "ponder", "dist", "esm", "bin", "ponder.js");
  const child: ChildProcess = spawn(
    process.execPath,
    [
      bin,
      "--log-format",
      options.logFormat,
      "--log-level",
      "warn",
      "start",
      "--schema",
      options.schema,
      "--views-schema",
      ONCHAIN_SCHEMA,
      "--port",
      String(options.port),
      "--hostname",
      "127.0.0.1",
    ],
    {
      cwd: ROOT,
      // Ponder reads PORT before --port: the service's PORT must not reach it.
      env: {
        ...withoutPort(process.env),
        DATABASE_URL: options.databaseUrl,
        CHAINS_CONFIG: options.chainsFile,
        FORCE_COLOR: "0",
      },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    },
  );
  const supervised = supervise(child, "the indexer (ponder)", options.onOutput);
  const url = `http://127.0.0.1:${options.port}`;
  const stop = () => stopChild(child, "SIGTERM", 15_000);
  await untilReady(
    waitFor(() => ready(url), {
      timeoutMs: options.readyTimeoutMs ?? 120_000,
      what: "the indexer",
      intervalMs: 100,
      signal: options.signal,
    }),
    supervised,
    stop,
  );
  return {
    url,
    schema: options.schema,
    pid: child.pid ?? -1,
    stop,
  };
};
