/**
 * `npm test`: lint and type-check, then every test (unit, then end-to-end against a real stack),
 * and a closing line `N passed, N failed[, N skipped]` computed from vitest's JSON report.
 * Exit code is non-zero on any failure. Extra arguments go to vitest (e.g. `npm test -- --project unit`).
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";

const run = (command: string, args: string[]) => spawnSync(command, args, { stdio: "inherit" }).status ?? 1;

const extra = process.argv.slice(2);
if (extra.length === 0) {
  for (const [name, command, args] of [
    ["lint", "biome", ["check", "."]],
    ["typecheck", "tsc", ["--noEmit", "-p", "."]],
    ["imports", "node", ["scripts/check-imports.ts"]],
  ] as const) {
    if (run(command, [...args]) !== 0) {
      console.log(`${name} failed`);
      console.log("0 passed, 1 failed");
      process.exit(1);
    }
  }
}

mkdirSync("test-results", { recursive: true });
const report = "test-results/vitest.json";
rmSync(report, { force: true });
const status = run("vitest", [
  "run",
  "--reporter=default",
  "--reporter=json",
  `--outputFile.json=${report}`,
  ...extra,
]);

if (!existsSync(report)) {
  console.log("0 passed, 1 failed");
  process.exit(status === 0 ? 1 : status);
}
const results = JSON.parse(readFileSync(report, "utf8")) as {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  numTotalTestSuites: number;
  numFailedTestSuites: number;
};
// A file that failed to load counts as a failure even though it ran no test.
const failed = results.numFailedTests + (results.numFailedTests === 0 && status !== 0 ? 1 : 0);
const skipped = results.numPendingTests + results.numTodoTests;
console.log(`${results.numPassedTests} passed, ${failed} failed${skipped > 0 ? `, ${skipped} skipped` : ""}`);
process.exit(failed > 0 || status !== 0 ? 1 : 0);
