/**
 * The retry schedule end to end under a controlled clock: the dispatcher's own pass (claim, send, record)
 * against a real Postgres and a real receiver, with "now" moved by the test. A receiver that never
 * answers 2xx gets exactly twelve attempts over about two days, then the delivery is `failed`; one that
 * recovers is retried until it succeeds; a claimed delivery is not claimed again until its lease has
 * run out. Runs on a database of its own so the stack's dispatcher does not take part.
 */
import type { PgClient } from "@effect/sql-pg";
import { Clock, Effect, Layer, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { databaseLayer } from "../../service/db/client.ts";
import { runMigrations } from "../../service/db/migrations.ts";
import { Outbox } from "../../service/events/outbox.ts";
import { DeliveryStore } from "../../service/webhooks/delivery-store.ts";
import { deliverDue } from "../../service/webhooks/dispatcher.ts";
import { WebhookEndpoints } from "../../service/webhooks/endpoints.ts";
import { webhookFanOut } from "../../service/webhooks/fan-out.ts";
import { MAX_ATTEMPTS, RETRY_WAITS_MS } from "../../service/webhooks/retry-schedule.ts";
import { SecretBox } from "../../service/webhooks/secret-box.ts";
import { AttemptSender } from "../../service/webhooks/sender.ts";
import { freshDatabase } from "./fresh-database.ts";
import { stack } from "./helpers.ts";
import { startReceiver } from "./receiver.ts";

const START = Date.UTC(2031, 0, 15, 12, 0, 0);
let now = START;
const controlledClock = (base: Clock.Clock): Clock.Clock => ({
  monotonicTimeNanosUnsafe: () => base.monotonicTimeNanosUnsafe(),
  monotonicTimeNanos: base.monotonicTimeNanos,
  sleep: (duration) => base.sleep(duration),
  currentTimeMillisUnsafe: () => now,
  currentTimeMillis: Effect.sync(() => now),
  currentTimeNanosUnsafe: () => BigInt(now) * 1_000_000n,
  currentTimeNanos: Effect.sync(() => BigInt(now) * 1_000_000n),
});

const OPTIONS = { maxInFlight: 50, maxInFlightPerEndpoint: 16, timeoutMs: 2000, allowPrivateInTest: true };
let databaseUrl = "";
beforeAll(async () => {
  databaseUrl = await freshDatabase("retries");
});

const layer = () => {
  const base = Layer.mergeAll(
    databaseLayer(databaseUrl, 4),
    SecretBox.layer(Redacted.make(stack().webhookSecretsKey)),
    AttemptSender.layer({ timeoutMs: OPTIONS.timeoutMs, connectionsPerOrigin: 16 }),
  );
  const stores = Layer.mergeAll(DeliveryStore.layer).pipe(
    Layer.provideMerge(base),
    Layer.provideMerge(Layer.effectDiscard(runMigrations).pipe(Layer.provide(base))),
  );
  return Layer.mergeAll(
    WebhookEndpoints.layer({ allowPrivateInTest: true }),
    Outbox.layer.pipe(Layer.provide(webhookFanOut)),
  ).pipe(Layer.provideMerge(stores));
};

const run = <A, E>(
  effect: Effect.Effect<
    A,
    E,
    | WebhookEndpoints
    | Outbox
    | DeliveryStore
    | SecretBox
    | AttemptSender
    | SqlClient.SqlClient
    | PgClient.PgClient
  >,
) =>
  Effect.runPromise(
    Effect.clockWith((base) =>
      effect.pipe(Effect.provide(layer()), Effect.provideService(Clock.Clock, controlledClock(base))),
    ),
  );

/** A merchant, an endpoint at `url` and one event for it; returns the delivery's id. */
const oneDelivery = (url: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const merchantId = `mer_retry${Math.random().toString(36).slice(2, 10)}`;
    yield* sql`INSERT INTO billing.merchants (id, name) VALUES (${merchantId}, 'Retries')`;
    const endpoints = yield* WebhookEndpoints;
    const endpoint = yield* endpoints.create(
      { merchantId, livemode: false },
      { url, events: ["mandate.authorized"] },
    );
    yield* (yield* Outbox).insert([
      {
        id: `evt_retry${Math.random().toString(36).slice(2, 12)}`,
        merchantId,
        livemode: false,
        type: "mandate.authorized",
        created: Math.floor(now / 1000),
        object: { id: "mdt_x", object: "mandate" },
        key: `retry-test:${merchantId}`,
      },
    ]);
    const [row] = yield* sql<{
      id: string;
    }>`SELECT id FROM billing.webhook_deliveries WHERE endpoint_id = ${endpoint.id}`;
    return String(row?.id);
  });

const deliveryState = (id: string) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const [row] = yield* sql<{ status: string; attempt_count: number; next_attempt_at: Date | null }>`
      SELECT status, attempt_count, next_attempt_at FROM billing.webhook_deliveries WHERE id = ${id}`;
    const attempts = yield* sql<{ number: number; attempted_at: Date; status_code: number | null }>`
      SELECT number, attempted_at, status_code FROM billing.webhook_attempts WHERE delivery_id = ${id} ORDER BY number`;
    return { ...(row as NonNullable<typeof row>), attempts };
  });

const receivers: Array<{ close(): Promise<void> }> = [];
afterAll(async () => {
  for (const receiver of receivers) await receiver.close();
});

describe("webhook retry schedule (controlled clock)", () => {
  it("retries a failing endpoint with growing, jittered waits for about two days, then marks it failed", async () => {
    const receiver = await startReceiver(() => ({ status: 500 }));
    receivers.push(receiver);
    now = START;
    const id = await run(oneDelivery(receiver.url));
    const sent = await run(deliverDue(OPTIONS));
    expect(sent.map((o) => o.deliveryId)).toEqual([id]);

    for (let attempt = 1; attempt < MAX_ATTEMPTS; attempt++) {
      const state = await run(deliveryState(id));
      expect(state).toMatchObject({ status: "pending", attempt_count: attempt });
      const due = state.next_attempt_at?.getTime() ?? 0;
      const wait = due - now;
      const nominal = RETRY_WAITS_MS[attempt - 1] ?? 0;
      expect(wait).toBeGreaterThanOrEqual(nominal * 0.9 - 1);
      expect(wait).toBeLessThanOrEqual(nominal * 1.1 + 1);
      // One second early: nothing is due, nothing is sent.
      now = due - 1000;
      expect(await run(deliverDue(OPTIONS))).toHaveLength(0);
      now = due;
      expect((await run(deliverDue(OPTIONS))).map((o) => o.number)).toEqual([attempt + 1]);
    }
    const final = await run(deliveryState(id));
    expect(final).toMatchObject({ status: "failed", attempt_count: MAX_ATTEMPTS, next_attempt_at: null });
    expect(final.attempts.map((a) => a.number)).toEqual(
      Array.from({ length: MAX_ATTEMPTS }, (_, i) => i + 1),
    );
    expect(final.attempts.every((a) => a.status_code === 500)).toBe(true);
    expect(receiver.received).toHaveLength(MAX_ATTEMPTS);
    const spanHours = (now - START) / 3_600_000;
    expect(spanHours).toBeGreaterThan(44);
    expect(spanHours).toBeLessThan(58);
    // Nothing more is ever sent.
    now += 30 * 86_400_000;
    expect(await run(deliverDue(OPTIONS))).toHaveLength(0);
    expect(receiver.received).toHaveLength(MAX_ATTEMPTS);
    // All the while every request carried the same event id.
    expect(new Set(receiver.received.map((r) => r.event.id)).size).toBe(1);
  });

  it("keeps retrying an endpoint that recovers until it answers 2xx", async () => {
    const receiver = await startReceiver((_request, index) =>
      index < 3 ? { status: 502 } : { status: 204 },
    );
    receivers.push(receiver);
    now = START + 90 * 86_400_000;
    const id = await run(oneDelivery(receiver.url));
    for (let i = 0; i < 6; i++) {
      const state = await run(deliveryState(id));
      if (state.status !== "pending") break;
      now = Math.max(now, state.next_attempt_at?.getTime() ?? now);
      await run(deliverDue(OPTIONS));
    }
    const final = await run(deliveryState(id));
    expect(final).toMatchObject({ status: "succeeded", attempt_count: 4, next_attempt_at: null });
    expect(final.attempts.map((a) => a.status_code)).toEqual([502, 502, 502, 204]);
  });

  it("claims a delivery once while its lease runs and again once it has run out (a lost lease is re-sent)", async () => {
    now = START + 180 * 86_400_000;
    const leaseMs = 30_000;
    const id = await run(oneDelivery("http://127.0.0.1:9/hooks"));
    const claims = () =>
      run(
        Effect.flatMap(DeliveryStore, (store) =>
          store.claimDue({ now, limit: 50, perEndpoint: 16, leaseMs, busy: new Map() }),
        ),
      ).then((rows) => rows.filter((row) => row.id === id).length);
    expect(await claims()).toBe(1);
    expect(await claims()).toBe(0);
    now += leaseMs - 1;
    expect(await claims()).toBe(0);
    // While leased, the next try shown is no sooner than the lease's end.
    const [shown] = await run(Effect.flatMap(DeliveryStore, (store) => store.byIds([id])));
    expect(shown?.next_attempt_at?.getTime()).toBe(now + 1);
    now += 1;
    expect(await claims()).toBe(1);
    expect(await run(deliveryState(id))).toMatchObject({ status: "pending", attempt_count: 0 });
  });

  it("records a late outcome as an attempt without moving the delivery, and nothing for a delivery that is gone", async () => {
    now = START + 270 * 86_400_000;
    const id = await run(oneDelivery("http://127.0.0.1:9/hooks"));
    const outcome = (attemptedAt: number, ok: boolean) => ({
      deliveryId: id,
      endpointId: "",
      number: 1,
      attemptedAt,
      outcome: {
        ok,
        statusCode: ok ? 200 : 500,
        durationMs: 3,
        error: ok ? null : "answered 500, not 2xx",
        responseBody: null,
      },
    });
    const record = (...outcomes: ReturnType<typeof outcome>[]) =>
      run(Effect.flatMap(DeliveryStore, (store) => store.recordOutcomes(outcomes, () => 0.5)));
    await record(outcome(now, true));
    // A second process's result for the same attempt (its lease had run out): an attempt, no state change.
    await record(outcome(now + 1, false));
    const state = await run(deliveryState(id));
    expect(state).toMatchObject({ status: "succeeded", attempt_count: 1, next_attempt_at: null });
    expect(state.attempts.map((a) => a.status_code)).toEqual([200, 500]);

    const eventIds = await run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient;
        const rows = yield* sql<{
          event_id: string;
        }>`SELECT event_id FROM billing.webhook_deliveries WHERE id = ${id}`;
        return rows.map((row) => row.event_id);
      }),
    );
    await run(Effect.flatMap(DeliveryStore, (store) => store.forgetEvents(eventIds)));
    // An outcome arriving after its delivery was forgotten writes nothing, and does not fail the batch.
    await record(outcome(now + 2, true));
    const gone = await run(deliveryState(id));
    expect(gone.attempts).toEqual([]);
    expect(gone.status).toBeUndefined();
  });
});
