/**
 * Two webhook dispatchers running normally: the stack's service and a second process on the same
 * database both claim due deliveries (the claims are leases taken with SKIP LOCKED). Events raised in a
 * burst through both processes, each to several endpoints, must reach every endpoint exactly once.
 * Counted at the receivers only once the system reports nothing left to send for those endpoints: every
 * delivery listed, none pending (a delivery is pending until an attempt's outcome is recorded, and its
 * lease is cleared with it), each with one attempt. That both dispatchers took part is made certain,
 * not hoped for: each receiver answers nothing until it holds more requests at once than one process
 * may have in flight to an endpoint, so a second process must have sent to it.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import { api, merchantOnTestChain, stack } from "./helpers.ts";
import { startReceiver } from "./receiver.ts";
import { startSecondService } from "./second-service.ts";

const EVENTS = 90;
const ENDPOINTS = 3;
/** Deliveries one process has in flight per endpoint at most: the stack's service's, and the second's. */
const PER_ENDPOINT = 16;

const receivers: Array<{ close(): Promise<void> }> = [];
afterAll(async () => {
  for (const receiver of receivers) await receiver.close();
});

/** The webhook attempts a process recorded as succeeded, from its `/metrics`. */
const attemptsSent = async (baseUrl: string, token: string) => {
  const text = await (
    await fetch(`${baseUrl}/metrics`, { headers: { authorization: `Bearer ${token}` } })
  ).text();
  const line = text
    .split("\n")
    .find((l) => l.startsWith('billing_webhook_attempt_duration_seconds_count{outcome="success"}'));
  return Number(line?.split(" ").at(-1) ?? 0);
};

describe("two webhook dispatchers on one database", () => {
  it("delivers each event once per endpoint, counted after nothing is pending", async () => {
    const token = readFileSync(join(stack().dataDir, "metrics.token"), "utf8").trim();
    const processes = [
      stack().apiUrl,
      await startSecondService({
        METRICS_TOKEN: token,
        WEBHOOK_MAX_IN_FLIGHT_PER_ENDPOINT: String(PER_ENDPOINT),
      }),
    ];
    const m = await merchantOnTestChain();
    // Each receiver holds every answer until its request number PER_ENDPOINT + 1 arrives: so many at once
    // come from two processes. Then it answers them all, and the rest at once.
    const gatedReceiver = () => {
      let open = () => {};
      const opened = new Promise<void>((resolve) => {
        open = resolve;
      });
      return startReceiver((_request, index) => {
        if (index >= PER_ENDPOINT) open();
        return { status: 200, until: opened };
      });
    };
    const hooks = await Promise.all(Array.from({ length: ENDPOINTS }, gatedReceiver));
    receivers.push(...hooks);
    const endpoints: string[] = [];
    for (const hook of hooks) {
      const created = await m.call("/v1/webhook_endpoints", {
        url: hook.url,
        events: ["subscription.canceled"],
      });
      expect(created.status, created.text).toBe(200);
      endpoints.push(created.json.id);
    }
    const price = await m.call("/v1/prices", { product_name: "Seat", amount_decimal: "1", chain: 31337 });
    expect(price.status, price.text).toBe(200);
    const subscriptions: string[] = [];
    for (let i = 0; i < EVENTS; i++) {
      const created = await m.call("/v1/subscriptions", { customer: `cus_${i}`, price: price.json.id });
      expect(created.status, created.text).toBe(200);
      subscriptions.push(created.json.id);
    }

    const before = await Promise.all(processes.map((url) => attemptsSent(url, token)));
    // One burst, through both processes: each cancellation raises one event for the three endpoints.
    const canceled = await Promise.all(
      subscriptions.map((id, i) =>
        api(`/v1/subscriptions/${id}/cancel`, {
          key: m.key,
          body: {},
          baseUrl: processes[i % processes.length],
        }),
      ),
    );
    for (const answer of canceled) expect(answer.status, answer.text).toBe(200);
    const events = (await m.events("subscription.canceled")).map((e) => e.id);
    expect(events).toHaveLength(EVENTS);

    // The settle point the system reports: every delivery of the endpoints exists and none is pending.
    const deliveriesOf = async (endpoint: string) =>
      (await m.call(`/v1/webhook_endpoints/${endpoint}/deliveries?limit=100`)).json.data as Array<{
        event: string;
        status: string;
        attempt_count: number;
        attempts: unknown[];
      }>;
    let listed: Awaited<ReturnType<typeof deliveriesOf>>[] = [];
    await waitFor(
      async () => {
        listed = await Promise.all(endpoints.map(deliveriesOf));
        return listed.every((ds) => ds.length === EVENTS && ds.every((d) => d.status !== "pending"));
      },
      { timeoutMs: 60_000, intervalMs: 100, what: "every delivery to be sent and recorded" },
    );
    for (const deliveries of listed) {
      expect(deliveries.map((d) => d.status)).toEqual(Array(EVENTS).fill("succeeded"));
      expect(deliveries.map((d) => d.attempts.length)).toEqual(Array(EVENTS).fill(1));
      expect(deliveries.map((d) => d.event).sort()).toEqual([...events].sort());
    }
    for (const hook of hooks) {
      const ids = hook.received.map((r) => r.event.id);
      expect(ids.sort()).toEqual([...events].sort());
    }
    // Both processes did send: the deliveries really were shared between two dispatchers.
    const after = await Promise.all(processes.map((url) => attemptsSent(url, token)));
    const sent = after.map((n, i) => n - (before[i] ?? 0));
    console.info(`webhook attempts per process: ${sent.join(", ")}`);
    expect(sent.reduce((a, b) => a + b, 0)).toBe(EVENTS * ENDPOINTS);
    for (const n of sent) expect(n).toBeGreaterThan(0);
  });
});
