/**
 * The service as a process of its own (`node service/main.ts`, its config given as environment), as a
 * deployment runs it. By default the stack runs the service in the stack's own process (a test can then
 * reach into it); a test measuring the service under load runs it apart, so that the test's own work (its
 * clients, receivers and pollers) does not share the service's event loop.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { type ServiceConfig, serviceEnvOf } from "../../service/config/env.ts";
import type { RunningService } from "../../service/main.ts";
import { ROOT } from "../contracts/compile.ts";
import { stopChild, supervise, untilReady } from "./processes.ts";
import { freePort, waitFor } from "./wait.ts";

/** Starts the service in a child process; resolves once it answers HTTP (`/ready` may still say 503). */
export const startServiceProcess = async (
  config: ServiceConfig,
  onOutput: (line: string) => void,
  signal?: AbortSignal,
): Promise<RunningService & { readonly pid: number }> => {
  const port = config.port === 0 ? await freePort() : config.port;
  const child = spawn(process.execPath, [join(ROOT, "service", "main.ts")], {
    cwd: ROOT,
    // Only what the service reads: nothing of this process's environment leaks into its config.
    env: serviceEnvOf({ ...config, port }),
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  const supervised = supervise(child, "the service", onOutput);
  const url = `http://${config.host}:${port}`;
  const stop = () => stopChild(child, "SIGTERM", 15_000);
  await untilReady(
    waitFor(async () => (await fetch(`${url}/ready`).catch(() => undefined)) !== undefined, {
      timeoutMs: 60_000,
      what: "the service process to answer HTTP",
      intervalMs: 100,
      signal,
    }),
    supervised,
    stop,
  );
  return { url, port, stop, pid: child.pid ?? -1 };
};
