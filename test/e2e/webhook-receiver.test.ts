/** The example receiver follows the handler contract, with a fixed clock and a real Postgres store. */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createReceiver, type EventStore, type ReceivedEvent } from "../../examples/webhook-receiver/app.ts";
import { createPostgresEventStore } from "../../examples/webhook-receiver/postgres-store.ts";
import { signatureHeader } from "../../service/webhooks/signature.ts";
import { stack } from "./helpers.ts";

const SECRET = "whsec_example_receiver_secret";
const NOW = 1_767_225_600;
let store: EventStore & { close(): Promise<void> };
beforeAll(async () => {
  store = await createPostgresEventStore(stack().databaseUrl, `receipts_${randomUUID().slice(0, 8)}`);
});
afterAll(() => store.close());

const event = (type: string) => ({
  id: `evt_${randomUUID().replaceAll("-", "")}`,
  object: "event",
  type,
  created: NOW,
  livemode: false,
  data: { object: { id: "ch_1" } },
});

const setup = (handlerDelayMs = 0) => {
  const handled: ReceivedEvent[] = [];
  const tests: ReceivedEvent[] = [];
  let resolveHandled: () => void = () => {};
  const handledOnce = new Promise<void>((resolve) => {
    resolveHandled = resolve;
  });
  const handler = async (e: ReceivedEvent) => {
    if (handlerDelayMs) await new Promise((resolve) => setTimeout(resolve, handlerDelayMs));
    handled.push(e);
    resolveHandled();
  };
  const app = createReceiver({
    secrets: [SECRET],
    store,
    handlers: { "charge.released": handler, "webhook.test": handler },
    onTest: (e) => tests.push(e),
    now: () => NOW,
  });
  const post = (body: string, header?: string) =>
    app.request("/webhooks", {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(header === undefined
          ? { "x-service-signature": signatureHeader(NOW, body, [SECRET]) }
          : { "x-service-signature": header }),
      },
      body,
    });
  return { handled, tests, handledOnce, post };
};

const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

describe("example webhook receiver", () => {
  it("verifies, records, answers 200 and handles once; a duplicate is 200 without the work", async () => {
    const r = setup();
    const body = JSON.stringify(event("charge.released"));
    const first = await r.post(body);
    expect(first.status).toBe(200);
    expect(await first.json()).toEqual({ received: true });
    await r.handledOnce;
    const again = await r.post(body);
    expect(await again.json()).toEqual({ received: true, duplicate: true });
    await settle();
    expect(r.handled).toHaveLength(1);
  });

  it("refuses bad, expired and malformed signatures with 400 and records nothing", async () => {
    const r = setup();
    const e = event("charge.released");
    const body = JSON.stringify(e);
    const cases: Array<[string, string]> = [
      [signatureHeader(NOW, body, ["whsec_wrong"]), "mismatch"],
      [signatureHeader(NOW - 301, body, [SECRET]), "expired"],
      [`v1=${"0".repeat(64)}`, "malformed"],
      ["", "malformed"],
    ];
    for (const [header, reason] of cases) {
      const response = await r.post(body, header);
      expect(response.status, reason).toBe(400);
      expect((await response.json()).error).toBe(reason);
    }
    expect(r.handled).toHaveLength(0);
    // Nothing was recorded: a valid delivery of the same id is still handled.
    expect((await r.post(body)).status).toBe(200);
    await r.handledOnce;
    expect(r.handled.map((h) => h.id)).toEqual([e.id]);
  });

  it("answers 200 to unknown types without work, and never hands webhook.test to a payment handler", async () => {
    const r = setup();
    expect((await r.post(JSON.stringify(event("brand.new_type")))).status).toBe(200);
    const test = event("webhook.test");
    expect((await r.post(JSON.stringify(test))).status).toBe(200);
    await settle();
    expect(r.handled).toHaveLength(0);
    expect(r.tests.map((t) => t.id)).toEqual([test.id]);
  });

  it("answers before an eight-second handler finishes", async () => {
    const r = setup(8000);
    const started = Date.now();
    const response = await r.post(JSON.stringify(event("charge.released")));
    expect(response.status).toBe(200);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(r.handled).toHaveLength(0);
  });

  it("records concurrent duplicates once", async () => {
    const r = setup();
    const body = JSON.stringify(event("charge.released"));
    const answers = (await Promise.all(
      Array.from({ length: 8 }, async () => (await r.post(body)).json()),
    )) as Array<{ duplicate?: boolean }>;
    expect(answers.filter((a) => !a.duplicate)).toHaveLength(1);
    await r.handledOnce;
    await settle();
    expect(r.handled).toHaveLength(1);
  });
});
