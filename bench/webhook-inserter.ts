/**
 * The benchmark's event source, in a process of its own (as the API and the fact relay would be):
 * writes `charge.succeeded` events through the service's outbox (each fans out to the merchant's
 * endpoints in the same transaction), with `sent_at` = the time just before the insert.
 * Says "ready" once connected and starts on "go".
 * `burst N`: N events in transactions of 500. `paced RATE SECONDS RECEIVERS`: RATE deliveries a second.
 */

import { PgClient } from "@effect/sql-pg";
import { Effect, Layer, ManagedRuntime, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import { type NewEvent, Outbox } from "../service/events/outbox.ts";
import { newId } from "../service/ids.ts";
import { DeliveryStore } from "../service/webhooks/delivery-store.ts";
import { webhookFanOut } from "../service/webhooks/fan-out.ts";

const [databaseUrl = "", merchantId = "", mode = "burst", ...args] = process.argv.slice(2);
const TICK_MS = 50;
let sequence = Date.now() * 1000;
// Each event's commit as the inserter saw it acknowledged, for WEBHOOK_BENCH_STAGES (bench/webhook-stages.ts).
const commits: Array<[string, number]> = [];

const insertBatch = (count: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const sentAt = Date.now();
    const events: NewEvent[] = [];
    for (let i = 0; i < count; i++) {
      const n = sequence++;
      events.push({
        id: yield* newId("event"),
        merchantId,
        livemode: false,
        type: "charge.succeeded",
        created: Math.floor(sentAt / 1000),
        object: { id: `ch_bench_${n}`, object: "charge", sent_at: sentAt },
        key: `bench:${n}`,
      });
    }
    yield* sql.withTransaction((yield* Outbox).insert(events));
    const committedAt = performance.timeOrigin + performance.now();
    for (const event of events) commits.push([event.id, committedAt]);
  });

const program = Effect.gen(function* () {
  if (mode === "burst") {
    const events = Number(args[0]);
    for (let i = 0; i < events; i += 500) yield* insertBatch(Math.min(500, events - i));
    return { events, offered_per_second: 0 };
  }
  const [rate = 2000, seconds = 10, receivers = 4] = args.map(Number);
  const perTick = Math.max(1, Math.round((rate * TICK_MS) / 1000 / receivers));
  let events = 0;
  const started = performance.now();
  for (let tick = 0; performance.now() - started < seconds * 1000; tick++) {
    yield* insertBatch(perTick);
    events += perTick;
    const wait = started + (tick + 1) * TICK_MS - performance.now();
    if (wait > 0) yield* Effect.sleep(`${wait} millis`);
  }
  return {
    events,
    offered_per_second: Math.round((events * receivers) / ((performance.now() - started) / 1000)),
  };
});

// Connected and warmed up before the parent starts its clock (a process start is not the dispatcher's
// time): "ready" when able to insert at once, then the run on "go".
const runtime = ManagedRuntime.make(
  Outbox.layer.pipe(
    Layer.provide(webhookFanOut),
    Layer.provide(DeliveryStore.layer),
    Layer.provideMerge(PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 2 })),
  ),
);
await runtime.runPromise(Effect.flatMap(SqlClient.SqlClient, (sql) => sql`SELECT 1`));
await new Promise<void>((resolve) => {
  process.once("message", () => resolve());
  process.send?.({ type: "ready" });
});
const cpuBefore = process.cpuUsage();
const result = await runtime.runPromise(program);
const cpu = process.cpuUsage(cpuBefore);
// The run's CPU time, this process's start and connection left out.
const cpu_ms = Math.round((cpu.user + cpu.system) / 1000);
// Exit only once the message is out: a large one (the commit times) is written in several parts.
await new Promise<void>((resolve) =>
  process.send?.({ type: "done", ...result, cpu_ms, commits }, () => resolve()),
);
await runtime.dispose();
process.exit(0);
