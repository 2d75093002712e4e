/**
 * Deliveries as merchants inspect and trigger them: the listing of an endpoint's deliveries with
 * their attempts, replaying an event by hand, and the test send. Sending itself is the dispatcher's.
 */
import { randomUUID } from "node:crypto";
import { PgClient } from "@effect/sql-pg";
import { Clock, Context, Effect, Layer, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import type { Caller } from "../auth/api-keys.ts";
import { decodeRows } from "../db/rows.ts";
import { type InvalidRequest, invalidParam, NotFound } from "../errors.ts";
import { raiseEvent } from "../events/outbox.ts";
import { ID_PATTERN } from "../ids.ts";
import { PageQuery, pageOf } from "../pagination.ts";
import { type EndpointRow, toEndpointObject } from "./endpoint-object.ts";
import { WebhookEndpoints } from "./endpoints.ts";
import { insertDeliveries } from "./fan-out.ts";
import { PRIVATE_RESPONSE_BODY_LIMIT } from "./sender.ts";

export const DELIVERY_STATUSES = ["pending", "succeeded", "failed"] as const;
const TRIGGERS = ["event", "replay", "test"] as const;

export const ListDeliveriesQuery = Schema.Struct({
  ...PageQuery.fields,
  status: Schema.optionalKey(Schema.Literals(DELIVERY_STATUSES)),
  event: Schema.optionalKey(
    Schema.String.check(Schema.isPattern(ID_PATTERN)).annotate({
      description: "Only deliveries of this event (evt_…)",
    }),
  ),
}).annotate({ identifier: "ListWebhookDeliveriesQuery" });
export type ListDeliveriesQuery = typeof ListDeliveriesQuery.Type;

export const ReplayEvent = Schema.Struct({
  endpoint: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "Send only to this endpoint (we_…); default: every enabled endpoint that subscribes to the event's type or already had it",
    }),
  ),
}).annotate({ identifier: "ReplayEventRequest" });
export type ReplayEvent = typeof ReplayEvent.Type;

export const AttemptObject = Schema.Struct({
  number: Schema.Int.annotate({ description: "1 for the first attempt" }),
  attempted: Schema.Int.annotate({ description: "Unix seconds" }),
  status_code: Schema.NullOr(Schema.Int).annotate({ description: "null when no HTTP answer came" }),
  duration_ms: Schema.Int,
  error: Schema.NullOr(Schema.String).annotate({
    description: "Why the attempt failed without a 2xx: timeout, connection error, redirect not followed…",
  }),
  response_body: Schema.NullOr(Schema.String).annotate({
    description:
      "The answer's first 1,000 characters in live mode; in test mode (which may reach loopback and private addresses) its first 200",
  }),
}).annotate({ identifier: "WebhookAttempt" });

export const DeliveryObject = Schema.Struct({
  id: Schema.String.annotate({ description: "whd_…" }),
  object: Schema.Literal("webhook_delivery"),
  endpoint: Schema.String,
  event: Schema.String.annotate({
    description: "evt_…: the same id on every delivery and replay of the event",
  }),
  event_type: Schema.String,
  trigger: Schema.Literals(TRIGGERS).annotate({
    description: "`event` (subscription), `replay` (POST /v1/events/{id}/replay) or `test`",
  }),
  status: Schema.Literals(DELIVERY_STATUSES).annotate({
    description: "`pending` until a 2xx (`succeeded`) or the last retry fails (`failed`)",
  }),
  attempt_count: Schema.Int,
  next_attempt: Schema.NullOr(Schema.Int).annotate({
    description: "Unix seconds of the next try, while pending",
  }),
  attempts: Schema.Array(AttemptObject),
  created: Schema.Int,
  livemode: Schema.Boolean,
}).annotate({ identifier: "WebhookDelivery" });
export type DeliveryObject = typeof DeliveryObject.Type;

const DeliveryRow = Schema.Struct({
  id: Schema.String,
  endpoint_id: Schema.String,
  event_id: Schema.String,
  event_type: Schema.String,
  trigger: Schema.Literals(TRIGGERS),
  status: Schema.Literals(DELIVERY_STATUSES),
  attempt_count: Schema.Number,
  next_attempt_at: Schema.NullOr(Schema.Date),
  created_at: Schema.Date,
  livemode: Schema.Boolean,
});
const decodeDeliveries = decodeRows(DeliveryRow);
const AttemptRow = Schema.Struct({
  delivery_id: Schema.String,
  number: Schema.Number,
  attempted_at: Schema.Date,
  status_code: Schema.NullOr(Schema.Number),
  duration_ms: Schema.Number,
  error: Schema.NullOr(Schema.String),
  response_body: Schema.NullOr(Schema.String),
});
const decodeAttempts = decodeRows(AttemptRow);
const EndpointId = Schema.Struct({ id: Schema.String });
const decodeIds = decodeRows(EndpointId);
const EventRow = Schema.Struct({ id: Schema.String, type: Schema.String });
const decodeEventRows = decodeRows(EventRow);

const unix = (date: Date) => Math.floor(date.getTime() / 1000);

const requireEnabled = (endpoint: EndpointRow, param: string) =>
  endpoint.status === "enabled"
    ? Effect.void
    : Effect.fail(
        invalidParam(
          param,
          `Webhook endpoint ${endpoint.id} is disabled: enable it first.`,
          "webhook_endpoint_disabled",
        ),
      );

export class Deliveries extends Context.Service<
  Deliveries,
  {
    readonly list: (
      caller: Caller,
      endpointId: string,
      query: ListDeliveriesQuery,
    ) => Effect.Effect<
      { object: "list"; data: DeliveryObject[]; has_more: boolean },
      NotFound | SqlError.SqlError
    >;
    readonly replay: (
      caller: Caller,
      eventId: string,
      input: ReplayEvent,
    ) => Effect.Effect<
      { object: "list"; data: DeliveryObject[]; has_more: false },
      InvalidRequest | NotFound | SqlError.SqlError
    >;
    readonly sendTest: (
      caller: Caller,
      endpointId: string,
    ) => Effect.Effect<DeliveryObject, InvalidRequest | NotFound | SqlError.SqlError>;
  }
>()("Deliveries") {
  static readonly layer = Layer.effect(
    Deliveries,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const pg = yield* PgClient.PgClient;
      const endpoints = yield* WebhookEndpoints;

      const render = (ids: readonly string[]) =>
        Effect.gen(function* () {
          if (ids.length === 0) return [] as DeliveryObject[];
          const rows = yield* sql`
            SELECT d.id, d.endpoint_id, d.event_id, d.event_type, d.trigger, d.status, d.attempt_count,
                   d.next_attempt_at, d.created_at, w.livemode
            FROM billing.webhook_deliveries d JOIN billing.webhook_endpoints w ON w.id = d.endpoint_id
            WHERE d.id IN ${sql.in(ids)} ORDER BY d.id DESC`.pipe(Effect.flatMap(decodeDeliveries));
          const attempts = yield* sql`
            SELECT delivery_id, number, attempted_at, status_code, duration_ms, error, response_body
            FROM billing.webhook_attempts WHERE delivery_id IN ${sql.in(ids)}
            ORDER BY attempted_at, number`.pipe(Effect.flatMap(decodeAttempts));
          return rows.map(
            (row): DeliveryObject => ({
              id: row.id,
              object: "webhook_delivery",
              endpoint: row.endpoint_id,
              event: row.event_id,
              event_type: row.event_type,
              trigger: row.trigger,
              status: row.status,
              attempt_count: row.attempt_count,
              next_attempt:
                row.status === "pending" && row.next_attempt_at ? unix(row.next_attempt_at) : null,
              attempts: attempts
                .filter((attempt) => attempt.delivery_id === row.id)
                .map((attempt) => ({
                  number: attempt.number,
                  attempted: unix(attempt.attempted_at),
                  status_code: attempt.status_code,
                  duration_ms: attempt.duration_ms,
                  error: attempt.error,
                  // Test mode may dial loopback and private addresses: only an excerpt of what they said
                  // (the sender keeps no more; this also cuts rows stored before it did).
                  response_body: row.livemode
                    ? attempt.response_body
                    : (attempt.response_body?.slice(0, PRIVATE_RESPONSE_BODY_LIMIT) ?? null),
                })),
              created: unix(row.created_at),
              livemode: row.livemode,
            }),
          );
        });

      const list = (caller: Caller, endpointId: string, query: ListDeliveriesQuery) =>
        Effect.gen(function* () {
          yield* endpoints.load(caller, endpointId);
          const limit = query.limit ?? 10;
          const status = query.status ?? null;
          const event = query.event ?? null;
          const after = query.starting_after ?? null;
          const ids = yield* sql`
            SELECT id FROM billing.webhook_deliveries
            WHERE endpoint_id = ${endpointId}
              AND (${status}::text IS NULL OR status = ${status})
              AND (${event}::text IS NULL OR event_id = ${event})
              AND (${after}::text IS NULL OR id < ${after})
            ORDER BY id DESC LIMIT ${limit + 1}`.pipe(Effect.flatMap(decodeIds));
          const page = pageOf(ids, limit);
          return { ...page, data: yield* render(page.data.map((row) => row.id)) };
        });

      const replay = (caller: Caller, eventId: string, input: ReplayEvent) =>
        sql.withTransaction(
          Effect.gen(function* () {
            const [event] = yield* sql`
              SELECT id, type FROM billing.events
              WHERE id = ${eventId} AND merchant_id = ${caller.merchantId} AND livemode = ${caller.livemode}`.pipe(
              Effect.flatMap(decodeEventRows),
            );
            if (!event)
              return yield* Effect.fail(
                new NotFound({
                  code: "resource_missing",
                  message: `No such event: '${eventId.slice(0, 80)}'`,
                  param: "id",
                }),
              );
            let targets: readonly string[];
            if (input.endpoint !== undefined) {
              const endpoint = yield* endpoints
                .load(caller, input.endpoint)
                .pipe(
                  Effect.catchTag("NotFound", (error) =>
                    Effect.fail(invalidParam("endpoint", error.message, "resource_missing")),
                  ),
                );
              yield* requireEnabled(endpoint, "endpoint");
              targets = [endpoint.id];
            } else {
              const rows = yield* sql`
                SELECT w.id FROM billing.webhook_endpoints w
                WHERE w.merchant_id = ${caller.merchantId} AND w.livemode = ${caller.livemode}
                  AND w.status = 'enabled' AND w.deleted_at IS NULL
                  AND ((${event.type} = ANY (w.events) AND ${event.type} <> 'webhook.test')
                       OR EXISTS (SELECT 1 FROM billing.webhook_deliveries d
                                  WHERE d.endpoint_id = w.id AND d.event_id = ${event.id}))
                ORDER BY w.id`.pipe(Effect.flatMap(decodeIds));
              targets = rows.map((row) => row.id);
            }
            if (targets.length === 0)
              return yield* Effect.fail(
                invalidParam(
                  "endpoint",
                  `No enabled webhook endpoint receives ${event.type} events: subscribe one, or name one with \`endpoint\`.`,
                  "webhook_endpoint_missing",
                ),
              );
            const ids = yield* insertDeliveries(
              targets.map((endpointId) => ({
                endpointId,
                eventId: event.id,
                eventType: event.type,
                trigger: "replay" as const,
              })),
            );
            return { object: "list" as const, data: yield* render(ids), has_more: false as const };
          }),
        );

      const sendTest = (caller: Caller, endpointId: string) =>
        sql.withTransaction(
          Effect.gen(function* () {
            const endpoint = yield* endpoints.load(caller, endpointId);
            yield* requireEnabled(endpoint, "id");
            const [eventId] = yield* raiseEvent({
              merchantId: caller.merchantId,
              livemode: caller.livemode,
              type: "webhook.test",
              key: `webhook.test:${randomUUID()}`,
              object: {
                object: "webhook_test",
                endpoint: toEndpointObject(endpoint, yield* Clock.currentTimeMillis),
                message: "A test event sent from the API. It is not a payment: do not act on it.",
              },
            });
            const ids = yield* insertDeliveries([
              {
                endpointId: endpoint.id,
                eventId: String(eventId),
                eventType: "webhook.test",
                trigger: "test",
              },
            ]);
            const [delivery] = yield* render(ids);
            return delivery as DeliveryObject;
          }),
        );

      return {
        list,
        replay: (caller: Caller, eventId: string, input: ReplayEvent) =>
          Effect.provideService(replay(caller, eventId, input), PgClient.PgClient, pg),
        sendTest: (caller: Caller, endpointId: string) =>
          Effect.provideService(sendTest(caller, endpointId), PgClient.PgClient, pg),
      };
    }),
  );
}
