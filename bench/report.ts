/**
 * One shape for every benchmark's results file (bench/results/<name>.json): when, where and at which
 * commit it was measured, and a `summary` of rows — figure beside the baseline measured in the same run
 * (or a physical limit), their ratio and the target — that `npm run bench` prints as one table
 * (bench/summary.ts).
 *
 * Targets are ratios measured in the same run (issue 48): to a bare baseline doing the same essential
 * work, or to a physical limit such as the chain's capacity, never an absolute time on a shared 2-core
 * machine. A row with neither keeps `ratio` and `target` null.
 */
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";

/** The target for the billing bench's cost per subscription at another size than 10,000. */
export const AGAINST_TEN_THOUSAND = "ratio ≤ 1.2 (to the 10,000 figure)";

export interface SummaryRow {
  /** What was measured, e.g. "webhook deliveries/s, burst". */
  readonly what: string;
  readonly figure: number;
  readonly unit: string;
  /** The baseline from the same run, or the physical limit, in `unit`; null when there is none. */
  readonly baseline: number | null;
  readonly baseline_what: string | null;
  /** figure ÷ baseline (or ÷ limit), from the same run's unrounded numbers where the bench has them. */
  readonly ratio: number | null;
  /** The target on the ratio as text, e.g. "ratio ≥ 0.6"; null where none is set (shown for reference). */
  readonly target: string | null;
  readonly meets_target: boolean | null;
}

/** figure ÷ baseline to 0.001; null without a baseline (or a zero one). */
export const ratioTo = (figure: number, baseline: number | null | undefined): number | null =>
  baseline === null || baseline === undefined || baseline === 0
    ? null
    : Math.round((figure / baseline) * 1000) / 1000;

/** A value to 0.1 (ms, usually), as the results files give them. */
export const tenths = (n: number): number => Math.round(n * 10) / 10;

/** The nearest-rank value at `p` percent of `values` (NaN left out); 0 when there are none. */
export const percentile = (values: ReadonlyArray<number>, p: number): number => {
  const sorted = values.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? 0;
};

/** p50, p90, p99 and max of `values`, to 0.1 ms. */
export const percentiles = (values: ReadonlyArray<number>) => {
  const at = (p: number) => tenths(percentile(values, p));
  return { p50_ms: at(50), p90_ms: at(90), p99_ms: at(99), max_ms: at(100) };
};

const bootId = (): string | null => {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    return null;
  }
};

export const machine = () => ({
  cores: cpus().length,
  cpu: cpus()[0]?.model ?? "unknown",
  node: process.version,
  // Machines of the same kind differ in speed by 2× and more (docs/performance.md at 64b9879, twelfth
  // round): the boot tells which results files were measured on the same machine, in the same boot.
  boot_id: bootId(),
});

/**
 * Wall-clock milliseconds of a `performance.now()` reading (default: now), comparable across the
 * processes of one machine and with Postgres's timestamps.
 */
export const wall = (now: number = performance.now()): number => performance.timeOrigin + now;

/**
 * The commit checked out, with "-dirty" when tracked files other than bench/results/ (which the benches of
 * one `npm run bench` write in turn) have changes; null outside a git checkout.
 */
const commit = (): string | null => {
  try {
    const head = execFileSync("git", ["rev-parse", "--short", "HEAD"], { encoding: "utf8" }).trim();
    const dirty = execFileSync(
      "git",
      ["status", "--porcelain", "--untracked-files=no", "--", ".", ":!bench/results"],
      { encoding: "utf8" },
    );
    return dirty.trim() === "" ? head : `${head}-dirty`;
  } catch {
    return null;
  }
};

export const writeResults = (
  name: string,
  command: string,
  summary: ReadonlyArray<SummaryRow>,
  details: Record<string, unknown>,
  file = `bench/results/${name}.json`,
): void => {
  mkdirSync("bench/results", { recursive: true });
  const report = {
    measured_at: new Date().toISOString(),
    commit: commit(),
    command,
    machine: machine(),
    summary,
    ...details,
  };
  writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
};
