/**
 * At-least-once across a crash: a service process is killed with SIGKILL while deliveries are in
 * flight, a new one starts on the same database, and every event reaches the receiver (duplicates
 * allowed, always with the same event id). Runs on a database of its own, so only these processes
 * dispatch.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { promisify } from "node:util";
import { afterAll, describe, expect, it } from "vitest";
import { freePort, waitFor } from "../../scripts/stack/wait.ts";
import { freshDatabase } from "./fresh-database.ts";
import { stack } from "./helpers.ts";
import { startReceiver } from "./receiver.ts";

const EVENTS = 60;
const children: ChildProcess[] = [];
const closers: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  for (const close of closers) await close();
});

const startServiceProcess = async (databaseUrl: string, port: number) => {
  const child = spawn(process.execPath, ["service/main.ts"], {
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      CHAINS_CONFIG: stack().chainsFile,
      WEBHOOK_SECRETS_KEY: stack().webhookSecretsKey,
      // A replica of the local stack, which alone lets test-mode webhooks reach loopback receivers.
      WEBHOOK_TEST_ALLOW_PRIVATE_URLS: "true",
      WEBHOOK_TIMEOUT_SECONDS: "2",
      PORT: String(port),
      LOG_LEVEL: "Error",
    },
    stdio: "ignore",
  });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${url}/ready`).catch(() => undefined))?.status === 200, {
    timeoutMs: 30_000,
    what: "service process ready",
  });
  return { child, url, exited: new Promise<void>((resolve) => child.once("exit", () => resolve())) };
};

const cli = async (databaseUrl: string, ...args: string[]) =>
  (
    await promisify(execFile)(process.execPath, ["service/cli.ts", ...args], {
      env: { ...process.env, DATABASE_URL: databaseUrl },
    })
  ).stdout.trim();

describe("webhook delivery across a crash", () => {
  it("delivers every event after the dispatching process is SIGKILLed mid-flight and another starts", async () => {
    const databaseUrl = await freshDatabase("crash");
    const receiver = await startReceiver(() => ({ status: 200, delayMs: 1000 }));
    closers.push(receiver.close);
    const port = await freePort();
    const first = await startServiceProcess(databaseUrl, port);

    const [merchantId] = (await cli(databaseUrl, "merchants", "create", "--name", "Crash")).split("\t");
    const [, key] = (
      await cli(databaseUrl, "keys", "create", "--merchant", String(merchantId), "--mode", "test")
    ).split("\t");
    const call = (path: string, body?: unknown) =>
      fetch(`${first.url}${path}`, {
        method: body === undefined ? "GET" : "POST",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          "idempotency-key": crypto.randomUUID(),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }).then(async (r) => ({ status: r.status, json: await r.json() }));
    const endpoint = await call("/v1/webhook_endpoints", { url: receiver.url, events: ["webhook.test"] });
    expect(endpoint.status).toBe(200);

    const eventIds: string[] = [];
    for (let i = 0; i < EVENTS; i++) {
      const test = await call(`/v1/webhook_endpoints/${endpoint.json.id}/test`, {});
      expect(test.status).toBe(200);
      eventIds.push(test.json.event);
    }
    // Kill while some deliveries are received and others are still in flight.
    await waitFor(async () => receiver.received.length >= 10, {
      timeoutMs: 10_000,
      what: "first deliveries",
    });
    first.child.kill("SIGKILL");
    await first.exited;
    const atCrash = receiver.ids().size;
    expect(atCrash).toBeLessThan(EVENTS);

    const second = await startServiceProcess(databaseUrl, await freePort());
    await waitFor(async () => eventIds.every((id) => receiver.ids().has(id)), {
      timeoutMs: 60_000,
      intervalMs: 200,
      what: `all ${EVENTS} events received after the restart (had ${atCrash} at the crash)`,
    });
    expect([...receiver.ids()].sort()).toEqual([...eventIds].sort());
    // Every delivery ends succeeded, as the surviving process lists them.
    const succeeded = async () =>
      (
        await fetch(
          `${second.url}/v1/webhook_endpoints/${endpoint.json.id}/deliveries?limit=100&status=succeeded`,
          {
            headers: { authorization: `Bearer ${key}` },
          },
        ).then((r) => r.json())
      ).data.length;
    await waitFor(async () => (await succeeded()) === EVENTS, {
      timeoutMs: 10_000,
      what: "all deliveries succeeded",
    });
  });
});
