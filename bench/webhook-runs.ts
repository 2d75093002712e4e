/**
 * Several runs of bench:webhooks, each in a fresh process, so that each side's burst is cold in every
 * run, as the figures were measured. One run's burst ratio ranged 0.38–0.71 over fifteen runs
 * on one machine (docs/performance.md at 64b9879), mostly with the bare loop's own speed, so a single
 * run lands on either side of the target. bench/webhooks.ts summarises the runs by the median of each
 * figure (report.ts's `percentile` at 50: the lower middle one of an even number).
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runInChild } from "./child-run.ts";

/** Runs `script` `runs` times, one after the other, each writing its results to a file of its own. */
export const runSeveral = async <R>(script: string, runs: number): Promise<R[]> => {
  const dir = mkdtempSync(join(tmpdir(), "webhook-bench-runs-"));
  try {
    const results: R[] = [];
    for (let i = 0; i < runs; i++) {
      console.log(`bench:webhooks: run ${i + 1} of ${runs}`);
      const resultsFile = join(dir, `run-${i}.json`);
      results.push(
        await runInChild<R>(
          script,
          { WEBHOOK_BENCH_RUNS: "1", WEBHOOK_BENCH_RESULTS: resultsFile },
          resultsFile,
        ),
      );
    }
    return results;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
};
