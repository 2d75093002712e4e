/**
 * Runs a bench script in a fresh process of the same Node (and its flags), with `env` added, and reads
 * the results file it wrote: how bench:webhooks repeats itself cold and how bench:billing makes the
 * 10,000 run it sets a larger one beside.
 */
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";

export const runInChild = <R>(
  script: string,
  env: Readonly<Record<string, string>>,
  resultsFile: string,
): Promise<R> =>
  new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...process.execArgv, script], {
      stdio: "inherit",
      env: { ...process.env, ...env },
    });
    child.once("error", reject);
    child.once("exit", (code, signal) =>
      code === 0
        ? resolve(JSON.parse(readFileSync(resultsFile, "utf8")) as R)
        : reject(new Error(`${script} exited with ${code ?? signal}`)),
    );
  });
