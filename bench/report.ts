/**
 * One shape for every benchmark's results file (bench/results/<name>.json): when and where it was
 * measured, and a `summary` of rows — figure beside the baseline measured in the same run and the
 * target — that `npm run bench` prints as one table (bench/summary.ts).
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { cpus } from "node:os";

export interface SummaryRow {
  /** What was measured, e.g. "webhook deliveries/s, burst". */
  readonly what: string;
  readonly figure: number;
  readonly unit: string;
  /** The baseline from the same run (or a published anchor), null when there is none. */
  readonly baseline: number | null;
  readonly baseline_what: string | null;
  /** The target as text, e.g. "≥ 5,000" or "≤ 50 ms"; null where the issue sets none (shown for reference). */
  readonly target: string | null;
  readonly meets_target: boolean | null;
}

export const machine = () => ({
  cores: cpus().length,
  cpu: cpus()[0]?.model ?? "unknown",
  node: process.version,
});

export const writeResults = (
  name: string,
  command: string,
  summary: ReadonlyArray<SummaryRow>,
  details: Record<string, unknown>,
): void => {
  mkdirSync("bench/results", { recursive: true });
  const report = { measured_at: new Date().toISOString(), command, machine: machine(), summary, ...details };
  writeFileSync(`bench/results/${name}.json`, `${JSON.stringify(report, null, 2)}\n`);
};
