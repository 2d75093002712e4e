/**
 * Temporary directories of stacks and chains outlive their creator when it is killed (SIGKILL, a crashed
 * or interrupted test run), and so do the processes they served: an anvil keeps hundreds of MB of states
 * on disk, a Postgres its cluster. Each such directory names its creator in an owner file; the next start
 * of the same kind collects the directories whose creator is gone.
 */
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { alive } from "./processes.ts";

const OWNER_FILE = "owner.pid";

/** Records the current process as the owner of `dir`, a directory it made under the temp dir. */
export const claim = (dir: string): void => writeFileSync(join(dir, OWNER_FILE), `${process.pid}\n`);

const pidIn = (file: string): number | undefined => {
  if (!existsSync(file)) return undefined;
  const pid = Number.parseInt(readFileSync(file, "utf8"), 10);
  return Number.isInteger(pid) && pid > 0 ? pid : undefined;
};

/**
 * Directories under the temp dir named `<prefix>…` whose owner is no longer running. One without an owner
 * file is left alone: its creator may be between making it and claiming it, or it predates owner files.
 */
export const abandoned = (prefix: string, root = tmpdir()): string[] =>
  readdirSync(root)
    .filter((name) => name.startsWith(prefix))
    .map((name) => join(root, name))
    .filter((dir) => {
      const owner = pidIn(join(dir, OWNER_FILE));
      return owner !== undefined && !alive(owner);
    });

/** Signals a process recorded in `file` if it still runs the program named (a pid may have been reused). */
export const signalRecorded = (file: string, program: RegExp, signal: NodeJS.Signals): number | undefined => {
  const pid = pidIn(file);
  if (pid === undefined || !alive(pid)) return undefined;
  const cmdline = existsSync(`/proc/${pid}/cmdline`) ? readFileSync(`/proc/${pid}/cmdline`, "utf8") : "";
  if (!program.test(cmdline)) return undefined;
  process.kill(pid, signal);
  return pid;
};

/** Removing garbage never fails a start: another start may be removing the same directory. */
export const removeQuietly = (dir: string): void => {
  try {
    rmSync(dir, { recursive: true, force: true });
  } catch {}
};
