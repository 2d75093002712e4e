/**
 * Another service process on the test stack's database, chains and indexer (replicas share only
 * Postgres): started on a free port, answered once `/ready` says so, stopped after the file's tests.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { afterAll } from "vitest";
import { freePort, waitFor } from "../../scripts/stack/wait.ts";
import { stack } from "./helpers.ts";

const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) child.kill("SIGTERM");
});

/** Starts a second service process (with `env` added); resolves to its base URL once it is ready. */
export const startSecondService = async (env: Record<string, string> = {}): Promise<string> =>
  (await startServiceProcess(env)).url;

/** The same, with a way to stop it: resolves once the process has exited. */
export const startServiceProcess = async (env: Record<string, string> = {}) => {
  const port = await freePort();
  const child = spawn(process.execPath, ["service/main.ts"], {
    env: {
      ...process.env,
      DATABASE_URL: stack().databaseUrl,
      CHAINS_CONFIG: stack().chainsFile,
      WEBHOOK_SECRETS_KEY: stack().webhookSecretsKey,
      // A replica of the local stack, which alone lets test-mode webhooks reach loopback receivers.
      WEBHOOK_TEST_ALLOW_PRIVATE_URLS: "true",
      PONDER_URL: stack().ponderUrl,
      PORT: String(port),
      LOG_FORMAT: "json",
      ...env,
    },
    stdio: ["ignore", "ignore", "pipe"],
  });
  children.push(child);
  // The last of its error output, to say why it never became ready.
  let errors = "";
  child.stderr?.on("data", (chunk: Buffer) => {
    errors = (errors + chunk.toString()).slice(-2000);
  });
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  await waitFor(async () => (await fetch(`${url}/ready`).catch(() => undefined))?.status === 200, {
    timeoutMs: 30_000,
    what: "second service process",
  }).catch((error: unknown) => {
    throw new Error(`${error instanceof Error ? error.message : error}; its stderr: ${errors || "(none)"}`);
  });
  const stop = async () => {
    child.kill("SIGTERM");
    await exited;
  };
  return { url, stop };
};
