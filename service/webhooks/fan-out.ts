/**
 * Deliveries are created in the transaction that records their event: the outbox calls `fanOut` for
 * each batch of new events, so an event committed is an event that will be delivered, and an event
 * rolled back was never offered to anyone. Each (endpoint, event) pair gets one delivery from fan-out;
 * replays and test sends add deliveries of their own.
 */
import { randomBytes } from "node:crypto";
import { PgClient } from "@effect/sql-pg";
import { Array as Arr, Clock, Effect, Schema } from "effect";
import { decodeRows } from "../db/rows.ts";
import { encodeId, ID_PREFIXES } from "../ids.ts";

export const DELIVERIES_CHANNEL = "billing_webhook_deliveries";

export type DeliveryTrigger = "event" | "replay" | "test";

export interface NewDelivery {
  readonly endpointId: string;
  readonly eventId: string;
  readonly eventType: string;
  readonly trigger: DeliveryTrigger;
}

/** Inserts deliveries due now and wakes the dispatchers on commit; returns their ids. */
export const insertDeliveries = (deliveries: readonly NewDelivery[]) =>
  Effect.gen(function* () {
    if (!Arr.isReadonlyArrayNonEmpty(deliveries)) return [] as string[];
    const sql = yield* PgClient.PgClient;
    const now = yield* Clock.currentTimeMillis;
    const rows = Arr.map(deliveries, (delivery) => ({
      id: encodeId(ID_PREFIXES.webhookDelivery, now, randomBytes(10)),
      endpoint_id: delivery.endpointId,
      event_id: delivery.eventId,
      event_type: delivery.eventType,
      trigger: delivery.trigger,
      status: "pending",
      next_attempt_at: new Date(now),
      created_at: new Date(now),
    }));
    const inserted = yield* sql<{ id: string }>`
      INSERT INTO billing.webhook_deliveries ${sql.insert(rows)}
      ON CONFLICT DO NOTHING
      RETURNING id`;
    if (inserted.length > 0) yield* sql`SELECT pg_notify(${DELIVERIES_CHANNEL}, '')`;
    return inserted.map((row) => row.id);
  });

const Subscriber = Schema.Struct({
  endpoint_id: Schema.String,
  event_id: Schema.String,
  type: Schema.String,
});
const decodeSubscribers = decodeRows(Subscriber);

/** What fan-out needs to know of an event just written. */
export interface FannedEvent {
  readonly id: string;
  readonly merchantId: string;
  readonly livemode: boolean;
  readonly type: string;
}

/**
 * One delivery per enabled endpoint of the event's merchant and mode that subscribed to its type.
 * `webhook.test` goes only to the endpoint it tests, never by subscription. The events are matched as
 * given rather than read back, so the endpoints table is the only one this reads.
 */
export const fanOut = (events: readonly FannedEvent[]) =>
  Effect.gen(function* () {
    if (events.length === 0) return [] as string[];
    const sql = yield* PgClient.PgClient;
    const subscribers = yield* sql`
      SELECT w.id AS endpoint_id, e.id AS event_id, e.type
      FROM unnest(${events.map((e) => e.id)}::text[], ${events.map((e) => e.merchantId)}::text[],
                  ${events.map((e) => e.livemode)}::boolean[], ${events.map((e) => e.type)}::text[])
           AS e(id, merchant_id, livemode, type)
      JOIN billing.webhook_endpoints w
        ON w.merchant_id = e.merchant_id AND w.livemode = e.livemode
       AND w.status = 'enabled' AND w.deleted_at IS NULL AND e.type = ANY (w.events)
      WHERE e.type <> 'webhook.test'`.pipe(Effect.flatMap(decodeSubscribers));
    return yield* insertDeliveries(
      subscribers.map((row) => ({
        endpointId: row.endpoint_id,
        eventId: row.event_id,
        eventType: row.type,
        trigger: "event" as const,
      })),
    );
  });
