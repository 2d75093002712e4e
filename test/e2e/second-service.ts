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
export const startSecondService = async (env: Record<string, string> = {}): Promise<string> => {
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
    stdio: "ignore",
  });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${url}/ready`).catch(() => undefined))?.status === 200, {
    timeoutMs: 30_000,
    what: "second service process",
  });
  return url;
};
