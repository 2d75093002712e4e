/**
 * GET /metrics: behind its own Bearer token (401 without it, 404 where no METRICS_TOKEN is configured),
 * Prometheus text that parses, HTTP series by route template (never the raw path), and plausible values
 * for the chain, indexer, webhook, billing and relayer gauges.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { freePort, waitFor } from "../../scripts/stack/wait.ts";
import { chainDriver } from "./chain-driver.ts";
import { api, expectErrorShape, merchantOnTestChain, newMerchantWithKey, stack } from "./helpers.ts";
import { startReceiver } from "./receiver.ts";

const token = () => readFileSync(join(stack().dataDir, "metrics.token"), "utf8").trim();

interface Sample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** A strict reader of the Prometheus text format (0.0.4): every line a comment or a sample. */
const parse = (text: string): Sample[] => {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("# HELP ") || line.startsWith("# TYPE ")) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not a Prometheus sample line: ${JSON.stringify(line)}`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?/g))
      labels[pair[1] as string] = pair[2] as string;
    const raw = match[3] as string;
    const value =
      raw === "+Inf" ? Number.POSITIVE_INFINITY : raw === "-Inf" ? Number.NEGATIVE_INFINITY : Number(raw);
    if (Number.isNaN(value) && raw !== "NaN") throw new Error(`bad value in ${JSON.stringify(line)}`);
    samples.push({ name: match[1] as string, labels, value });
  }
  return samples;
};

const scrape = async () => {
  const response = await fetch(`${stack().apiUrl}/metrics`, {
    headers: { authorization: `Bearer ${token()}` },
  });
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toContain("text/plain");
  return parse(await response.text());
};

const find = (samples: Sample[], name: string, labels: Record<string, string> = {}) =>
  samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));

const value = (samples: Sample[], name: string, labels: Record<string, string> = {}) => {
  const found = find(samples, name, labels);
  if (found.length !== 1)
    throw new Error(`expected one ${name}${JSON.stringify(labels)}, found ${found.length}`);
  return (found[0] as Sample).value;
};

const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) child.kill("SIGTERM");
});

describe("GET /metrics", () => {
  it("answers 401 without the token or with a wrong one, in the one error shape", async () => {
    for (const authorization of [undefined, "Bearer wrong-token-0123456789", `Basic ${token()}`, token()]) {
      const response = await fetch(`${stack().apiUrl}/metrics`, {
        headers: authorization === undefined ? {} : { authorization },
      });
      expect(response.status).toBe(401);
      expect(response.headers.get("www-authenticate")).toContain("Bearer");
      const body = await response.json();
      expectErrorShape(body);
      expect(body.error.code).toBe("metrics_token_invalid");
    }
    // An API key is not the metrics token either.
    const withApiKey = await fetch(`${stack().apiUrl}/metrics`, {
      headers: { authorization: `Bearer ${stack().apiKey}` },
    });
    expect(withApiKey.status).toBe(401);
  });

  it("serves parseable Prometheus text with the named series and plausible values", async () => {
    const receiver = await startReceiver();
    try {
      // Traffic to count: a route with a parameter (answered 404), an unknown path, a webhook test delivery.
      expect((await api("/v1/chains")).status).toBe(200);
      expect((await api("/v1/mandates/mdt_doesnotexist000000")).status).toBe(404);
      expect((await api("/no/such/path/xyz")).status).toBe(404);
      const { key } = await newMerchantWithKey();
      const endpoint = await api("/v1/webhook_endpoints", {
        key,
        body: { url: receiver.url, events: ["charge.succeeded"] },
      });
      expect(endpoint.status, endpoint.text).toBe(200);
      expect((await api(`/v1/webhook_endpoints/${endpoint.json.id}/test`, { key, body: {} })).status).toBe(
        200,
      );
      await waitFor(async () => receiver.received.length > 0, {
        timeoutMs: 15_000,
        what: "the test delivery",
      });

      // The watchdog's first check (chain heads, the relayer's balance) comes within a few seconds of start.
      let samples: Sample[] = [];
      await waitFor(
        async () => {
          samples = await scrape();
          return (
            find(samples, "billing_chain_head_block", { chain_id: "31337" }).length === 1 &&
            find(samples, "billing_webhook_attempt_duration_seconds_count", { outcome: "success" }).length ===
              1
          );
        },
        { timeoutMs: 15_000, intervalMs: 250, what: "the chain head and the webhook attempt in /metrics" },
      );

      // HTTP: by route template and status, with latency histograms; never the raw path.
      const chains = { method: "GET", route: "/v1/chains", status: "200" };
      expect(value(samples, "billing_http_requests_total", chains)).toBeGreaterThanOrEqual(1);
      expect(value(samples, "billing_http_request_duration_seconds_count", chains)).toBeGreaterThanOrEqual(1);
      expect(value(samples, "billing_http_request_duration_seconds_bucket", { ...chains, le: "+Inf" })).toBe(
        value(samples, "billing_http_request_duration_seconds_count", chains),
      );
      expect(
        value(samples, "billing_http_requests_total", {
          method: "GET",
          route: "/v1/mandates/:id",
          status: "404",
        }),
      ).toBeGreaterThanOrEqual(1);
      expect(
        value(samples, "billing_http_requests_total", { method: "GET", route: "unmatched", status: "404" }),
      ).toBeGreaterThanOrEqual(1);
      const routes = new Set(find(samples, "billing_http_requests_total").map((s) => s.labels.route));
      expect([...routes].some((route) => route?.includes("mdt_") || route?.includes("xyz"))).toBe(false);

      // Per chain: heads, lag, stall flag, relayer.
      for (const chainId of ["31337", "31339"]) {
        const chain = { chain_id: chainId };
        const head = value(samples, "billing_chain_head_block", chain);
        const indexed = value(samples, "billing_indexed_head_block", chain);
        expect(head).toBeGreaterThan(0);
        expect(indexed).toBeGreaterThan(0);
        expect(value(samples, "billing_indexer_lag_blocks", chain)).toBeGreaterThanOrEqual(0);
        expect(value(samples, "billing_indexer_lag_blocks", chain)).toBeLessThan(1000);
        expect(value(samples, "billing_indexer_lag_seconds", chain)).toBeGreaterThanOrEqual(0);
        expect(value(samples, "billing_indexer_stalled", chain)).toBe(0);
        expect(value(samples, "billing_relayer_balance_wei", chain)).toBeGreaterThan(1e18);
        expect(value(samples, "billing_relayer_transactions_pending", chain)).toBeGreaterThanOrEqual(0);
        expect(value(samples, "billing_subscriptions_due", chain)).toBeGreaterThanOrEqual(0);
        expect(value(samples, "billing_payment_deposits_due", chain)).toBeGreaterThanOrEqual(0);
        expect(value(samples, "billing_token_paused", { ...chain, token: "USDC" })).toBe(0);
        for (const kind of ["charge_release", "payment_sweep", "payment_release"])
          expect(value(samples, "billing_transfers_held_back", { ...chain, kind })).toBeGreaterThanOrEqual(0);
        for (const reason of ["fee_ceiling", "replacement_limit", "budget"])
          expect(
            value(samples, "billing_relayer_transactions_held", { ...chain, reason }),
          ).toBeGreaterThanOrEqual(0);
        // No thresholds on these chains: never low, never below a floor.
        expect(value(samples, "billing_relayer_balance_low", chain)).toBe(0);
        expect(value(samples, "billing_relayer_balance_below_floor", chain)).toBe(0);
      }
      expect(value(samples, "billing_metrics_database_up")).toBe(1);
      expect(value(samples, "billing_webhook_deliveries", { status: "pending" })).toBeGreaterThanOrEqual(0);
      expect(value(samples, "billing_webhook_deliveries", { status: "failed" })).toBeGreaterThanOrEqual(0);
      expect(value(samples, "billing_invoices_open")).toBeGreaterThanOrEqual(0);
      const attempts = value(samples, "billing_webhook_attempt_duration_seconds_count", {
        outcome: "success",
      });
      expect(attempts).toBeGreaterThanOrEqual(1);
      const attemptSeconds = value(samples, "billing_webhook_attempt_duration_seconds_sum", {
        outcome: "success",
      });
      expect(attemptSeconds).toBeGreaterThan(0);
      expect(attemptSeconds / attempts).toBeLessThan(10);
      // Hooks for other parts of the service exist (at zero or above) and Node's own metrics are there.
      expect(find(samples, "process_resident_memory_bytes").length).toBe(1);
    } finally {
      await receiver.close();
    }
  });

  it("counts a relayer transaction while it is pending (its chain id is a bigint)", async () => {
    const m = await merchantOnTestChain();
    const created = await m.call("/v1/mandates", { cap_decimal: "5", period: "month", customer: "c" });
    await m.call(`/v1/test/mandates/${created.json.id}/fund`, { amount_decimal: "5" });
    expect((await m.call(`/v1/test/mandates/${created.json.id}/authorize`, {})).status).toBe(200);
    const chain = chainDriver(31337);
    await chain.rpc("evm_setAutomine", [false]);
    try {
      const charged = await m.call(`/v1/mandates/${created.json.id}/charges`, { amount_decimal: "1" });
      expect(charged.json.status, charged.text).toBe("pending");
      // Broadcast once its request committed; then it waits in the node's pool, unmined.
      await waitFor(
        async () => value(await scrape(), "billing_relayer_transactions_pending", { chain_id: "31337" }) >= 1,
        { timeoutMs: 15_000, what: "the pending charge in /metrics" },
      );
    } finally {
      await chain.rpc("evm_setAutomine", [true]);
      await chain.mine(1);
    }
  });

  it("does not exist (404) in a service process without METRICS_TOKEN", async () => {
    const port = await freePort();
    const { METRICS_TOKEN: _unset, ...env } = process.env;
    const child = spawn(process.execPath, ["service/main.ts"], {
      env: {
        ...env,
        PORT: String(port),
        DATABASE_URL: stack().databaseUrl,
        CHAINS_CONFIG: stack().chainsFile,
        WEBHOOK_SECRETS_KEY: stack().webhookSecretsKey,
        // A replica of the local stack, which alone lets test-mode webhooks reach loopback receivers.
        WEBHOOK_TEST_ALLOW_PRIVATE_URLS: "true",
        LOG_LEVEL: "error",
      },
      stdio: "ignore",
    });
    children.push(child);
    const url = `http://127.0.0.1:${port}`;
    await waitFor(async () => (await fetch(`${url}/ready`).catch(() => undefined))?.status === 200, {
      timeoutMs: 30_000,
      what: "a service process without METRICS_TOKEN",
    });
    for (const authorization of [undefined, `Bearer ${token()}`]) {
      const response = await fetch(`${url}/metrics`, { headers: authorization ? { authorization } : {} });
      expect(response.status).toBe(404);
      expect((await response.json()).error.code).toBe("route_not_found");
    }
  });
});
