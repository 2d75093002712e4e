/**
 * CPU seconds used so far by this process and every process it started (Postgres, anvil, Ponder), and
 * their memory, grouped by name, from /proc (Linux). Two readings apart give each process's share of a phase, which
 * other work on the machine moves far less than wall time.
 */
import { readdirSync, readFileSync } from "node:fs";

const TICKS_PER_SECOND = 100;

interface Stat {
  readonly pid: number;
  readonly ppid: number;
  readonly name: string;
  readonly ticks: number;
}

const readStat = (pid: string): Stat | undefined => {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The name is in parentheses and may hold spaces; the fields after it are space-separated.
    const close = text.lastIndexOf(")");
    const name = text.slice(text.indexOf("(") + 1, close);
    const fields = text.slice(close + 2).split(" ");
    return {
      pid: Number(pid),
      ppid: Number(fields[1]),
      name,
      // utime + stime, plus cutime + cstime: the children it has reaped (Postgres's backends and
      // autovacuum workers that ended), whose time would otherwise vanish from the sum when they exit.
      ticks: Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]),
    };
  } catch {
    return undefined; // the process ended meanwhile
  }
};

/** Ponder runs in a Node process whose main thread names itself `MainThread`. */
const isPonder = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").includes("ponder");
  } catch {
    return false;
  }
};

/**
 * `measure` of this process and every process it started, folded by process name ("ponder" for
 * Ponder's; this process is `self`: the bench and, in it, the service).
 */
const byProcessName = (
  measure: (stat: Stat) => number,
  fold: (a: number, b: number) => number,
): Record<string, number> => {
  const stats = readdirSync("/proc")
    .filter((entry) => /^\d+$/.test(entry))
    .flatMap((pid) => readStat(pid) ?? []);
  const children = new Map<number, Stat[]>();
  for (const stat of stats) children.set(stat.ppid, [...(children.get(stat.ppid) ?? []), stat]);
  const totals: Record<string, number> = {};
  const visit = (pid: number, self: boolean) => {
    const stat = stats.find((s) => s.pid === pid);
    if (stat) {
      const name = self ? "self" : isPonder(pid) ? "ponder" : stat.name;
      const value = measure(stat);
      totals[name] = totals[name] === undefined ? value : fold(totals[name], value);
    }
    for (const child of children.get(pid) ?? []) visit(child.pid, false);
  };
  visit(process.pid, true);
  return totals;
};

/** CPU seconds by process name. */
export const processCpuSeconds = (): Record<string, number> =>
  byProcessName(
    (stat) => stat.ticks / TICKS_PER_SECOND,
    (a, b) => a + b,
  );

/** A /proc status or smaps_rollup field in kB (0 once the process ended). */
const kilobytes = (pid: number, file: "status" | "smaps_rollup", field: string) => {
  try {
    const line = readFileSync(`/proc/${pid}/${file}`, "utf8")
      .split("\n")
      .find((l) => l.startsWith(`${field}:`));
    return Number(line?.split(/\s+/)[1] ?? 0);
  } catch {
    return 0;
  }
};

const megabytes = (totals: Record<string, number>) =>
  Object.fromEntries(Object.entries(totals).map(([name, kb]) => [name, Math.round(kb / 102.4) / 10]));

/**
 * Memory by process name, in MB: `pss`, each group's proportional set size now (shared pages split
 * among their sharers, so Postgres's backends are not each counted with all of its shared buffers), and
 * `peak_rss`, the largest peak resident size of one process of the group (VmHWM).
 */
export const processMemoryMegabytes = () => ({
  pss: megabytes(
    byProcessName(
      (stat) => kilobytes(stat.pid, "smaps_rollup", "Pss"),
      (a, b) => a + b,
    ),
  ),
  peak_rss: megabytes(
    byProcessName(
      (stat) => kilobytes(stat.pid, "status", "VmHWM"),
      (a, b) => Math.max(a, b),
    ),
  ),
});

/** What each name used between two readings, in seconds (two decimals). */
export const cpuBetween = (before: Record<string, number>, after: Record<string, number>) =>
  Object.fromEntries(
    Object.entries(after).map(([name, seconds]) => [
      name,
      Math.round((seconds - (before[name] ?? 0)) * 100) / 100,
    ]),
  );

/**
 * This process's CPU seconds by thread name (/proc/self/task): `MainThread` (the service and the
 * bench's own HTTP client), `WorkerThread` (the bench's signing workers), V8's helpers (GC). Only each
 * thread's own time: a thread's reaped-children fields are the whole process's.
 */
export const threadCpuSeconds = (): Record<string, number> => {
  const totals: Record<string, number> = {};
  for (const tid of readdirSync("/proc/self/task")) {
    try {
      const text = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
      const close = text.lastIndexOf(")");
      const name = text.slice(text.indexOf("(") + 1, close);
      const fields = text.slice(close + 2).split(" ");
      totals[name] = (totals[name] ?? 0) + (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
    } catch {
      // the thread ended meanwhile
    }
  }
  return totals;
};
