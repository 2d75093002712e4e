/**
 * The example receiver follows the handler contract: called in-process (`app.request`) with a fixed
 * clock, on the stack's real Postgres with a table of its own for this run.
 */
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createReceiver,
  type EventHandler,
  type EventStore,
  type ReceivedEvent,
} from "../../examples/webhook-receiver/app.ts";
import { createPostgresEventStore } from "../../examples/webhook-receiver/postgres-store.ts";
import { signatureHeader } from "../../service/webhooks/signature.ts";
import { query, stack } from "./helpers.ts";

const SECRET = "whsec_example_receiver_secret";
const NOW = 1_767_225_600;
const TABLE = `webhook_receipts_${randomUUID().replaceAll("-", "").slice(0, 12)}`;

let store: EventStore & { close(): Promise<void> };
beforeAll(async () => {
  store = await createPostgresEventStore(stack().databaseUrl, TABLE);
});
afterAll(async () => {
  await store?.close();
  await query(`DROP TABLE IF EXISTS "${TABLE}"`);
});

const recorded = async (id: string) =>
  (await query<{ n: number }>(`SELECT count(*)::int AS n FROM "${TABLE}" WHERE event_id = $1`, [id]))[0]?.n;

const event = (type: string) => ({
  id: `evt_${randomUUID().replaceAll("-", "")}`,
  object: "event",
  type,
  created: NOW,
  livemode: false,
  data: { object: { id: "ch_1", amount_decimal: "10.00" } },
});

/** Resolves once `count` calls have been seen; the array keeps every call. */
const recorder = (count = 1) => {
  const calls: ReceivedEvent[] = [];
  let done: () => void = () => {};
  const reached = new Promise<void>((resolve) => {
    done = resolve;
  });
  const record = (e: ReceivedEvent) => {
    calls.push(e);
    if (calls.length >= count) done();
  };
  return { calls, reached, record };
};

const setup = (
  overrides: {
    readonly handlers?: Partial<Record<string, EventHandler>>;
    readonly secrets?: readonly string[];
    readonly store?: EventStore;
  } = {},
) => {
  const payments = recorder();
  const tests = recorder();
  const errors: Array<{ error: unknown; event: ReceivedEvent }> = [];
  const paymentHandler: EventHandler = async (e) => payments.record(e);
  const app = createReceiver({
    secrets: overrides.secrets ?? [SECRET],
    store: overrides.store ?? store,
    // A payment handler is registered under "webhook.test" too: it must never run.
    handlers: overrides.handlers ?? { "charge.released": paymentHandler, "webhook.test": paymentHandler },
    onTest: (e) => tests.record(e),
    onError: (error, e) => errors.push({ error, event: e }),
    now: () => NOW,
  });
  const post = async (body: string, header: string | null = signatureHeader(NOW, body, [SECRET])) => {
    const response = await app.request("/webhooks", {
      method: "POST",
      headers: {
        "content-type": "application/json",
        ...(header === null ? {} : { "x-service-signature": header }),
      },
      body,
    });
    return { status: response.status, json: (await response.json()) as Record<string, unknown> };
  };
  return { payments, tests, errors, post };
};

/**
 * The receiver schedules its work (setImmediate) before it answers; an immediate queued after the
 * answer runs after that work has started, since Node runs immediates in order and the microtasks
 * of each before the next. So after this, whatever the answer scheduled has begun (and the handlers
 * here act at once): a check of what did not happen rests on the event loop's order, not on a pause.
 */
const scheduledWorkStarted = () => new Promise<void>((resolve) => setImmediate(resolve));

describe("example webhook receiver", () => {
  it("verifies, records, answers 200 and runs the handler once; the same event again is 200 duplicate", async () => {
    const r = setup();
    const e = event("charge.released");
    const body = JSON.stringify(e);
    expect(await r.post(body)).toEqual({ status: 200, json: { received: true } });
    await r.payments.reached;
    expect(r.payments.calls).toEqual([e]);
    expect(await recorded(e.id)).toBe(1);

    // A redelivery (signed afresh, as a retry is) is recognised by its id.
    expect(await r.post(body, signatureHeader(NOW + 5, body, [SECRET]))).toEqual({
      status: 200,
      json: { received: true, duplicate: true },
    });
    await scheduledWorkStarted();
    expect(r.payments.calls).toHaveLength(1);
    expect(await recorded(e.id)).toBe(1);
  });

  it("refuses a bad, expired or malformed signature with 400 naming the reason, and records nothing", async () => {
    const r = setup();
    const e = event("charge.released");
    const body = JSON.stringify(e);
    const cases: Array<[string | null, string]> = [
      [signatureHeader(NOW, body, ["whsec_wrong"]), "mismatch"],
      [signatureHeader(NOW, `${body} `, [SECRET]), "mismatch"],
      [signatureHeader(NOW - 301, body, [SECRET]), "expired"],
      [signatureHeader(NOW + 301, body, [SECRET]), "expired"],
      [`v1=${"0".repeat(64)}`, "malformed"],
      [`t=${NOW}`, "malformed"],
      ["", "malformed"],
      [null, "malformed"],
    ];
    for (const [header, reason] of cases) {
      const response = await r.post(body, header);
      expect(response.status, reason).toBe(400);
      expect(response.json.error, String(header)).toBe(reason);
      expect(typeof response.json.message).toBe("string");
    }
    // Re-serialised JSON does not verify: the receiver checks the bytes as sent.
    const reserialised = JSON.stringify(e, null, 1);
    expect((await r.post(reserialised, signatureHeader(NOW, body, [SECRET]))).json.error).toBe("mismatch");
    await scheduledWorkStarted();
    expect(r.payments.calls).toHaveLength(0);
    expect(await recorded(e.id)).toBe(0);

    // Nothing was recorded, so a valid delivery of the same id is still handled.
    expect(await r.post(body)).toEqual({ status: 200, json: { received: true } });
    await r.payments.reached;
    expect(r.payments.calls.map((c) => c.id)).toEqual([e.id]);
    expect(await recorded(e.id)).toBe(1);
  });

  it("refuses a signed body that is not a JSON event with 400, recording nothing", async () => {
    const r = setup();
    for (const [body, error] of [
      ["not json", "invalid_json"],
      ["[1,2]", "not_an_event"],
      ['{"type":"charge.released"}', "not_an_event"],
      ['{"id":"","type":"charge.released"}', "not_an_event"],
    ] as const)
      expect(await r.post(body), body).toMatchObject({ status: 400, json: { error: error } });
    await scheduledWorkStarted();
    expect(r.payments.calls).toHaveLength(0);
  });

  it("answers 200 to an unknown type and runs no handler", async () => {
    const r = setup();
    for (const type of ["brand.new_type", "toString", "constructor", "__proto__"]) {
      const e = event(type);
      expect(await r.post(JSON.stringify(e)), type).toEqual({ status: 200, json: { received: true } });
      expect(await recorded(e.id)).toBe(1);
    }
    await scheduledWorkStarted();
    expect(r.payments.calls).toHaveLength(0);
    expect(r.errors).toHaveLength(0);
  });

  it("routes webhook.test to onTest only, never to the payment handler registered under its name", async () => {
    const r = setup();
    const test = event("webhook.test");
    expect(await r.post(JSON.stringify(test))).toEqual({ status: 200, json: { received: true } });
    await r.tests.reached;
    await scheduledWorkStarted();
    expect(r.tests.calls.map((t) => t.id)).toEqual([test.id]);
    expect(r.payments.calls).toHaveLength(0);
  });

  it("answers within a second although the handler takes eight", async () => {
    // The handler runs until the test lets it finish (standing for eight seconds of work).
    const finish = Promise.withResolvers<void>();
    const started = recorder();
    const finished: string[] = [];
    const done = Promise.withResolvers<void>();
    const r = setup({
      handlers: {
        "charge.released": async (e) => {
          started.record(e);
          await finish.promise;
          finished.push(e.id);
          done.resolve();
        },
      },
    });
    const e = event("charge.released");
    const before = performance.now();
    const response = await r.post(JSON.stringify(e));
    const elapsed = performance.now() - before;
    expect(response).toEqual({ status: 200, json: { received: true } });
    expect(elapsed).toBeLessThan(1000);
    // The work did start after the answer, and is still running.
    await started.reached;
    expect(finished).toEqual([]);
    finish.resolve();
    await done.promise;
    expect(finished).toEqual([e.id]);
  });

  it("runs the handler exactly once for concurrent duplicate deliveries", async () => {
    const r = setup();
    const e = event("charge.released");
    const body = JSON.stringify(e);
    const answers = await Promise.all(Array.from({ length: 12 }, () => r.post(body)));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    expect(answers.filter((a) => a.json.duplicate !== true)).toHaveLength(1);
    await r.payments.reached;
    await scheduledWorkStarted();
    expect(r.payments.calls).toHaveLength(1);
    expect(await recorded(e.id)).toBe(1);
  });

  it("records once across two stores with their own pools (two receiver processes)", async () => {
    const other = await createPostgresEventStore(stack().databaseUrl, TABLE);
    try {
      const id = `evt_${randomUUID()}`;
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? store : other).recordOnce(id)),
      );
      expect(results.filter((first) => first)).toHaveLength(1);
    } finally {
      await other.close();
    }
  });

  it("accepts either secret during a rotation overlap", async () => {
    const r = setup({ secrets: ["whsec_new", SECRET] });
    const old = event("charge.released");
    expect((await r.post(JSON.stringify(old))).status).toBe(200);
    const body = JSON.stringify(event("charge.released"));
    expect((await r.post(body, signatureHeader(NOW, body, ["whsec_new", SECRET]))).status).toBe(200);
    expect((await r.post(body, signatureHeader(NOW, body, ["whsec_other"]))).status).toBe(400);
  });

  it("reports a failing handler to onError after answering 200, whether it rejects or throws", async () => {
    const failure = new Error("fulfilment down");
    const r = setup({
      handlers: {
        "charge.released": async () => {
          throw failure;
        },
        // A handler that throws before returning a promise must not take the process down either.
        "charge.returned": (() => {
          throw failure;
        }) as EventHandler,
      },
    });
    const a = event("charge.released");
    const b = event("charge.returned");
    expect((await r.post(JSON.stringify(a))).status).toBe(200);
    expect((await r.post(JSON.stringify(b))).status).toBe(200);
    await scheduledWorkStarted();
    expect(r.errors).toHaveLength(2);
    expect(r.errors.map((x) => [x.event.id, x.error])).toEqual(
      expect.arrayContaining([
        [a.id, failure],
        [b.id, failure],
      ]),
    );
  });

  it("answers 500 when the id cannot be recorded, so that the service retries", async () => {
    const r = setup({
      store: {
        recordOnce: async () => {
          throw new Error("database unavailable");
        },
      },
    });
    const response = await r.post(JSON.stringify(event("charge.released")));
    expect(response).toMatchObject({ status: 500, json: { error: "store_unavailable" } });
    await scheduledWorkStarted();
    expect(r.payments.calls).toHaveLength(0);
    expect(r.errors.map((x) => (x.error as Error).message)).toEqual(["database unavailable"]);
  });
});
