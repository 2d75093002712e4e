/**
 * Closing a chain stops new subscriptions only. Subscriptions are opened on chain 31339 through a second
 * service process whose config still has the chain open; that process is stopped (the operator closed the
 * chain and restarted with the new config), and the stack's own service, whose config says
 * `subscriptions_available: false`, refuses new subscriptions there yet keeps billing the existing ones
 * month after month, cancelling none.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { LOCAL_RELAYER_KEY } from "../../scripts/stack/local-chain.ts";
import { freePort, waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver } from "./chain-driver.ts";
import { api, expectErrorShape, newAddress, newMerchantWithKey, query, stack } from "./helpers.ts";

const MONTH = 31 * 86_400;
const SUBSCRIPTIONS = 3;

const children: ChildProcess[] = [];
const timers: NodeJS.Timeout[] = [];
afterAll(() => {
  for (const child of children) child.kill("SIGTERM");
  for (const timer of timers) clearInterval(timer);
});

/** A service process on the stack's database with chain 31339 still open to subscriptions. */
const processWithChainOpen = async () => {
  const file = join(stack().dataDir, "chains-31339-open.json");
  const config = JSON.parse(readFileSync(stack().chainsFile, "utf8")) as {
    chains: Array<{ id: number; subscriptions_available: boolean }>;
  };
  for (const chain of config.chains) if (chain.id === 31339) chain.subscriptions_available = true;
  writeFileSync(file, JSON.stringify(config));
  const port = await freePort();
  const child = spawn(process.execPath, ["service/main.ts"], {
    env: {
      ...process.env,
      DATABASE_URL: stack().databaseUrl,
      CHAINS_CONFIG: file,
      WEBHOOK_SECRETS_KEY: stack().webhookSecretsKey,
      PONDER_URL: stack().ponderUrl,
      PORT: String(port),
      RELAYER_PRIVATE_KEY: LOCAL_RELAYER_KEY,
      LOG_FORMAT: "json",
    },
    stdio: "ignore",
  });
  children.push(child);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(async () => (await fetch(`${url}/ready`).catch(() => undefined))?.status === 200, {
    timeoutMs: 30_000,
    what: "the process with 31339 open",
  });
  const stopped = new Promise((resolve) => child.once("exit", resolve));
  const stop = () => {
    child.kill("SIGTERM");
    return stopped;
  };
  return { url, stop };
};

describe("a chain closed to subscriptions", () => {
  it("refuses new subscriptions but keeps billing the existing ones, cancelling none", async () => {
    // 31339 confirms after 2 blocks: keep it mining so facts reach the service.
    const chain = chainDriver(31339);
    timers.push(setInterval(() => void chain.mine(1).catch(() => undefined), 250));

    const { key } = await newMerchantWithKey("test");
    const call = (path: string, body?: unknown) => api(path, body === undefined ? { key } : { key, body });
    await call("/v1/merchant/chains", { chain: 31339, payout_address: newAddress() });
    const price = await call("/v1/prices", { product_name: "Legacy", amount_decimal: "2", chain: 31339 });
    expect(price.status, price.text).toBe(200);

    const open = await processWithChainOpen();
    const ids: string[] = [];
    for (let i = 0; i < SUBSCRIPTIONS; i++) {
      const response = await fetch(`${open.url}/v1/subscriptions`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${key}`,
          "content-type": "application/json",
          "idempotency-key": crypto.randomUUID(),
        },
        body: JSON.stringify({ customer: `cus_${i}`, price: price.json.id }),
      });
      const sub = (await response.json()) as { id: string; mandate: string };
      expect(response.status, JSON.stringify(sub)).toBe(200);
      ids.push(sub.id);
      await call(`/v1/test/mandates/${sub.mandate}/fund`, { amount_decimal: "20" });
      expect((await call(`/v1/test/mandates/${sub.mandate}/authorize`, {})).status).toBe(200);
    }
    const paid = async (period: number) =>
      Number(
        (
          await query<{ n: string }>(
            "SELECT count(*)::text AS n FROM billing.invoices WHERE subscription_id = ANY($1) AND period = $2 AND status = 'paid'",
            [ids, period],
          )
        )[0]?.n,
      );
    await waitFor(async () => (await paid(0)) === SUBSCRIPTIONS, {
      timeoutMs: 60_000,
      what: "first invoices paid",
    });

    // The operator closes the chain: only the service whose config says so remains.
    await open.stop();
    const refused = await call("/v1/subscriptions", { customer: "cus_new", price: price.json.id });
    expect(refused.status).toBe(400);
    expect(expectErrorShape(refused.json)).toMatchObject({ code: "chain_closed", param: "price" });

    for (const period of [1, 2]) {
      const advanced = await call("/v1/test/clock/advance", { seconds: MONTH, chain: 31339 });
      expect(advanced.status, advanced.text).toBe(200);
      await waitFor(async () => (await paid(period)) === SUBSCRIPTIONS, {
        timeoutMs: 60_000,
        what: `period ${period} paid on the closed chain`,
      });
    }
    const subscriptions = await query<{ status: string; n: string }>(
      `SELECT s.status, count(i.id)::text AS n FROM billing.subscriptions s
       JOIN billing.invoices i ON i.subscription_id = s.id WHERE s.id = ANY($1) GROUP BY s.id, s.status`,
      [ids],
    );
    expect(subscriptions).toHaveLength(SUBSCRIPTIONS);
    for (const row of subscriptions) expect(row).toEqual({ status: "active", n: "3" });
  });
});
