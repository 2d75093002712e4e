/**
 * The production entry point (`node service/main.ts`, configured by env) as a second process against
 * the same database: JSON logs with request ids and no secrets; migrations already applied are a no-op;
 * a bad chain config fails the start with a message naming the field.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort, waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import { newMerchantWithKey, query, stack } from "./helpers.ts";
import { relaySettled } from "./settle.ts";

const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) child.kill("SIGTERM");
});

const startServiceProcess = (env: Record<string, string>) => {
  const child = spawn(process.execPath, ["service/main.ts"], {
    env: {
      ...process.env,
      DATABASE_URL: stack().databaseUrl,
      CHAINS_CONFIG: stack().chainsFile,
      WEBHOOK_SECRETS_KEY: stack().webhookSecretsKey,
      // A replica of the local stack, which alone lets test-mode webhooks reach loopback receivers.
      WEBHOOK_TEST_ALLOW_PRIVATE_URLS: "true",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  children.push(child);
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));
  return { child, output: () => output, exited };
};

describe("service process", () => {
  it("logs one JSON line per request with its request id, never the API key", async () => {
    const port = await freePort();
    const { key } = await newMerchantWithKey();
    const service = startServiceProcess({
      PORT: String(port),
      LOG_FORMAT: "json",
      PONDER_URL: stack().ponderUrl,
    });
    const url = `http://127.0.0.1:${port}`;
    await waitFor(async () => (await fetch(`${url}/ready`).catch(() => undefined))?.status === 200, {
      timeoutMs: 30_000,
      what: "second service process",
    });
    const response = await fetch(`${url}/v1/chains`, { headers: { authorization: `Bearer ${key}` } });
    const requestId = response.headers.get("request-id");
    expect(response.status).toBe(200);
    await waitFor(async () => service.output().includes(String(requestId)), {
      timeoutMs: 5000,
      what: "request log line",
    });
    const lines = service
      .output()
      .split("\n")
      .filter((line) => line.trim() !== "");
    for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
    const entry = lines
      .map((line) => JSON.parse(line))
      .find((l) => JSON.stringify(l).includes(String(requestId)));
    expect(JSON.stringify(entry)).toContain("/v1/chains");
    expect(service.output()).not.toContain(key);
    expect(service.output()).not.toContain(key.slice(8));
    service.child.kill("SIGTERM");
    expect(await service.exited).toBe(0);
  });

  it("relays each fact once while two service processes relay at the same time", async () => {
    const port = await freePort();
    const second = startServiceProcess({ PORT: String(port), PONDER_URL: stack().ponderUrl });
    await waitFor(
      async () => (await fetch(`http://127.0.0.1:${port}/ready`).catch(() => undefined))?.status === 200,
      {
        timeoutMs: 30_000,
        what: "second service process",
      },
    );
    const chain = chainDriver(31337);
    const customer = await chain.newCustomer();
    const mandates: `0x${string}`[] = [];
    for (let i = 0; i < 5; i++)
      mandates.push((await chain.authorize(customer, { salt: BigInt(9000 + i) })).mandateId);
    for (const mandateId of mandates) await chain.charge(mandateId, usd("1"));
    const count = async () =>
      (
        await query<{ n: number }>(
          `SELECT count(*)::int AS n FROM billing.events WHERE payload->'data'->'object'->>'id' IN (
             SELECT id FROM billing.mandates WHERE onchain_id = ANY($1)
             UNION SELECT c.id FROM billing.charges c JOIN billing.mandates m ON m.id = c.mandate_id
             WHERE m.onchain_id = ANY($1))`,
          [mandates],
        )
      )[0]?.n;
    await waitFor(async () => (await count()) === 10, { timeoutMs: 15_000, what: "10 events" });
    // Both processes kept relaying: the relay has since read a later fact, and made no second event.
    await relaySettled(31337);
    expect(await count()).toBe(10);
    second.child.kill("SIGTERM");
    expect(await second.exited).toBe(0);
  });

  it("answers /ready with 503 and the failing check while the indexer is unreachable", async () => {
    const port = await freePort();
    const service = startServiceProcess({
      PORT: String(port),
      PONDER_URL: `http://127.0.0.1:${await freePort()}`,
    });
    const url = `http://127.0.0.1:${port}`;
    // It listens at once (answering "starting") and serves its checks once its layers are built.
    await waitFor(
      async () => {
        const answer = await fetch(`${url}/ready`).catch(() => undefined);
        return (
          ((await answer?.json().catch(() => undefined)) as { checks?: { workers?: string } } | undefined)
            ?.checks?.workers === "ready"
        );
      },
      { timeoutMs: 30_000, what: "second service process to serve" },
    );
    const response = await fetch(`${url}/ready`);
    expect(response.status).toBe(503);
    expect(await response.json()).toMatchObject({
      ready: false,
      checks: { database: "ready", indexer: "unreachable", workers: "ready" },
    });
    service.child.kill("SIGTERM");
    expect(await service.exited).toBe(0);
  });

  it("fails to start on an invalid chain config, naming the bad field", async () => {
    const bad = join(stack().dataDir, "bad-chains.json");
    writeFileSync(
      bad,
      JSON.stringify({
        chains: [
          {
            id: 5,
            name: "x",
            livemode: true,
            rpc: { http: ["ftp://nope"] },
            tokens: [],
            subscriptions_available: true,
            payments_available: true,
            escrow_available: false,
            hold_seconds: 0,
            confirmations: 0,
          },
        ],
      }),
    );
    const service = startServiceProcess({ PORT: String(await freePort()), CHAINS_CONFIG: bad });
    expect(await service.exited).not.toBe(0);
    expect(service.output()).toContain("chains[0].rpc.http[0]");
  });
});
