/**
 * What a killed run leaves behind (scripts/stack/abandoned.ts): an anvil's on-disk states, a scratch data
 * directory with its Postgres still running. Killed for real: SIGKILL of the anvil, and of a child process
 * that started the chain or the database, as a crashed test run or an interrupted `npm test` does.
 */
import { spawn } from "node:child_process";
import {
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { abandoned, claim } from "../../scripts/stack/abandoned.ts";
import { startAnvil } from "../../scripts/stack/anvil.ts";
import { alive } from "../../scripts/stack/processes.ts";
import { removeAbandonedScratchDirs } from "../../scripts/stack/scratch-stack.ts";
import { freePort, waitFor } from "../../scripts/stack/wait.ts";

const cleanups: Array<() => void> = [];
afterAll(() => {
  for (const cleanup of cleanups) cleanup();
});

/** The value after `flag` on a running process's command line. */
const argOf = (pid: number, flag: string): string | undefined => {
  const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
  const at = args.indexOf(flag);
  return at < 0 ? undefined : args[at + 1];
};

/** A pid that belonged to a process and no longer does. */
const deadPid = async (): Promise<number> => {
  const child = spawn("true");
  await new Promise((resolve) => child.once("exit", resolve));
  return child.pid ?? -1;
};

/** Runs `code` (an ES module body) in a child Node process; resolves to its first output line and the child. */
const runChild = async (code: string) => {
  const child = spawn(process.execPath, ["--input-type=module", "-e", code], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  cleanups.push(() => child.kill("SIGKILL"));
  const line = await new Promise<string>((resolve, reject) => {
    child.stdout.once("data", (chunk: Buffer) => resolve(chunk.toString().trim()));
    child.once("exit", (code) => reject(new Error(`child exited with ${code} before reporting`)));
  });
  return { child, line };
};

const killed = (child: ReturnType<typeof spawn>) =>
  new Promise<void>((resolve) => {
    child.once("exit", () => resolve());
    child.kill("SIGKILL");
  });

describe("abandoned directories", () => {
  it("are those whose owner file names a process that is gone, and only those", async () => {
    const root = mkdtempSync(join(tmpdir(), "abandoned-"));
    cleanups.push(() => rmSync(root, { recursive: true, force: true }));
    const make = (name: string) => {
      mkdirSync(join(root, name));
      return join(root, name);
    };
    const mine = make("stack-mine");
    claim(mine);
    const gone = make("stack-gone");
    writeFileSync(join(gone, "owner.pid"), `${await deadPid()}\n`);
    make("stack-unclaimed");
    const otherKind = make("other-gone");
    writeFileSync(join(otherKind, "owner.pid"), `${await deadPid()}\n`);
    const garbled = make("stack-garbled");
    writeFileSync(join(garbled, "owner.pid"), "not a pid\n");

    expect(abandoned("stack-", root)).toEqual([gone]);
  });
});

describe("an anvil's states on disk", () => {
  it("live in a directory of its own, removed when the anvil is SIGKILLed", async () => {
    const anvil = await startAnvil({ port: await freePort(), chainId: 31337 });
    const states = argOf(anvil.pid, "--cache-path");
    expect(states?.startsWith(join(tmpdir(), "anvil-states-"))).toBe(true);
    expect(readFileSync(join(states ?? "", "anvil.pid"), "utf8").trim()).toBe(String(anvil.pid));

    process.kill(anvil.pid, "SIGKILL");
    await waitFor(async () => !existsSync(states ?? ""), {
      timeoutMs: 10_000,
      what: "the states directory removed",
    });
  });

  it("of an anvil whose starter was killed: the anvil is stopped and the directory removed at the next start", async () => {
    const port = await freePort();
    const { child, line } = await runChild(
      `const { startAnvil } = await import(${JSON.stringify(`${process.cwd()}/scripts/stack/anvil.ts`)});
       const anvil = await startAnvil({ port: ${port}, chainId: 31337 });
       console.log(anvil.pid);`,
    );
    const orphan = Number(line);
    cleanups.push(() => alive(orphan) && process.kill(orphan, "SIGKILL"));
    const states = argOf(orphan, "--cache-path") ?? "";
    await killed(child);
    // The starter is gone; its anvil (a process group of its own) runs on, and so does its directory.
    expect(alive(orphan)).toBe(true);
    expect(existsSync(states)).toBe(true);

    const next = await startAnvil({ port: await freePort(), chainId: 31337 });
    cleanups.push(() => void next.stop());
    await waitFor(async () => !alive(orphan), { timeoutMs: 15_000, what: "the orphaned anvil stopped" });
    expect(existsSync(states)).toBe(false);
    expect(readdirSync(tmpdir()).filter((name) => name.startsWith("anvil-states-"))).toContain(
      argOf(next.pid, "--cache-path")?.slice(tmpdir().length + 1),
    );
    await next.stop();
  });
});

describe("a scratch data directory whose owner was killed", () => {
  it("has its Postgres stopped and is removed, with the cluster kept outside it as root", async () => {
    const port = await freePort();
    const { child, line } = await runChild(
      `const { scratchDir } = await import(${JSON.stringify(`${process.cwd()}/scripts/stack/scratch-stack.ts`)});
       const { startEmbeddedPostgres } = await import(${JSON.stringify(`${process.cwd()}/scripts/stack/postgres.ts`)});
       const { join } = await import("node:path");
       const scratch = scratchDir("leftovers", []);
       await startEmbeddedPostgres({ dataDir: join(scratch.dataDir, "postgres"), port: ${port}, database: "leftovers" });
       console.log(scratch.dataDir);`,
    );
    const dataDir = line;
    const pgData = join(dataDir, "postgres");
    const postmaster = Number(readFileSync(join(pgData, "postmaster.pid"), "utf8").split("\n")[0]);
    cleanups.push(() => alive(postmaster) && process.kill(postmaster, "SIGKILL"));
    // As root the cluster lives under /var/lib, linked from the data directory (postgres-paths.ts).
    const outside = lstatSync(pgData).isSymbolicLink() ? dirname(readlinkSync(pgData)) : undefined;
    await killed(child);
    expect(alive(postmaster)).toBe(true);

    await removeAbandonedScratchDirs();
    expect(alive(postmaster)).toBe(false);
    expect(existsSync(dataDir)).toBe(false);
    if (outside !== undefined) expect(existsSync(outside)).toBe(false);
  });
});
