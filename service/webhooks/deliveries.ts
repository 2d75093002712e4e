/**
 * Deliveries as merchants inspect and trigger them: the listing of an endpoint's deliveries with
 * their attempts, replaying an event by hand, and the test send. Sending itself is the dispatcher's.
 */
import { randomUUID } from "node:crypto";
import { PgClient } from "@effect/sql-pg";
import { Clock, Context, Effect, Layer, Schema } from "effect";
import type { SqlError } from "effect/sql";
import type { Page } from "../db/query.ts";
import { decodeRows } from "../db/rows.ts";
import { type InvalidRequest, invalidParam, type NotFound, resourceMissing } from "../errors.ts";
import { Outbox } from "../events/outbox.ts";
import { ID_PATTERN } from "../ids.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { PageQuery } from "../pagination.ts";
import {
  type AttemptRow,
  DELIVERY_STATUSES,
  type DeliveryRow,
  DeliveryStore,
  TRIGGERS,
} from "./delivery-store.ts";
import { type EndpointRow, toEndpointObject } from "./endpoint-object.ts";
import { WebhookEndpoints } from "./endpoints.ts";
import { PRIVATE_RESPONSE_BODY_LIMIT } from "./sender.ts";

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

const decodeIds = decodeRows(Schema.Struct({ id: Schema.String }));
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

const renderDelivery = (row: DeliveryRow, attempts: ReadonlyArray<AttemptRow>): DeliveryObject => ({
  id: row.id,
  object: "webhook_delivery",
  endpoint: row.endpoint_id,
  event: row.event_id,
  event_type: row.event_type,
  trigger: row.trigger,
  status: row.status,
  attempt_count: row.attempt_count,
  next_attempt: row.status === "pending" && row.next_attempt_at ? unix(row.next_attempt_at) : null,
  attempts: attempts
    .filter((attempt) => attempt.delivery_id === row.id)
    .map((attempt) => ({
      number: attempt.number,
      attempted: unix(attempt.attempted_at),
      status_code: attempt.status_code,
      duration_ms: attempt.duration_ms,
      error: attempt.error,
      // Test mode may dial loopback and private addresses: only an excerpt of what they said (the sender
      // keeps no more; this also cuts rows stored before it did).
      response_body: row.livemode
        ? attempt.response_body
        : (attempt.response_body?.slice(0, PRIVATE_RESPONSE_BODY_LIMIT) ?? null),
    })),
  created: unix(row.created_at),
  livemode: row.livemode,
});

export class Deliveries extends Context.Service<
  Deliveries,
  {
    readonly list: (
      scope: MerchantScope,
      endpointId: string,
      query: ListDeliveriesQuery,
    ) => Effect.Effect<Page<DeliveryObject>, InvalidRequest | NotFound | SqlError.SqlError>;
    readonly replay: (
      scope: MerchantScope,
      eventId: string,
      input: ReplayEvent,
    ) => Effect.Effect<
      { object: "list"; data: DeliveryObject[]; has_more: false },
      InvalidRequest | NotFound | SqlError.SqlError
    >;
    readonly sendTest: (
      scope: MerchantScope,
      endpointId: string,
    ) => Effect.Effect<DeliveryObject, InvalidRequest | NotFound | SqlError.SqlError>;
  }
>()("Deliveries") {
  static readonly layer = Layer.effect(
    Deliveries,
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient;
      const endpoints = yield* WebhookEndpoints;
      const store = yield* DeliveryStore;
      const outbox = yield* Outbox;

      const withAttempts = (rows: ReadonlyArray<DeliveryRow>) =>
        Effect.map(store.attemptsOf(rows.map((row) => row.id)), (attempts) =>
          rows.map((row) => renderDelivery(row, attempts)),
        );
      const render = (ids: ReadonlyArray<string>) => Effect.flatMap(store.byIds(ids), withAttempts);

      const list = (scope: MerchantScope, endpointId: string, query: ListDeliveriesQuery) =>
        Effect.gen(function* () {
          yield* endpoints.load(scope, endpointId);
          const page = yield* store.pageForEndpoint(
            endpointId,
            {
              ...(query.status !== undefined ? { status: query.status } : {}),
              ...(query.event !== undefined ? { event: query.event } : {}),
            },
            query,
          );
          return { ...page, data: yield* withAttempts(page.data) };
        });

      /** The endpoints a replay goes to when none is named: subscribers of its type, and those that had it. */
      const replayTargets = (scope: MerchantScope, event: { readonly id: string; readonly type: string }) =>
        sql`SELECT w.id FROM billing.webhook_endpoints w
          WHERE w.merchant_id = ${scope.merchantId} AND w.livemode = ${scope.livemode}
            AND w.status = 'enabled' AND w.deleted_at IS NULL
            AND ((${event.type} = ANY (w.events) AND ${event.type} <> 'webhook.test')
                 OR EXISTS (SELECT 1 FROM billing.webhook_deliveries d
                            WHERE d.endpoint_id = w.id AND d.event_id = ${event.id}))
          ORDER BY w.id`.pipe(
          Effect.flatMap(decodeIds),
          Effect.map((rows) => rows.map((row) => row.id)),
        );

      const replay = (scope: MerchantScope, eventId: string, input: ReplayEvent) =>
        sql.withTransaction(
          Effect.gen(function* () {
            // Locked against its deletion (forgetEvents) until the replay's deliveries are committed: the
            // deliveries' reference to their event has no foreign key (migration 0019).
            const [event] = yield* sql`SELECT id, type FROM billing.events
              WHERE id = ${eventId} AND merchant_id = ${scope.merchantId} AND livemode = ${scope.livemode}
              FOR KEY SHARE`.pipe(Effect.flatMap(decodeEventRows));
            if (!event) return yield* resourceMissing("event", eventId);
            let targets: ReadonlyArray<string>;
            if (input.endpoint !== undefined) {
              const endpoint = yield* endpoints
                .load(scope, input.endpoint)
                .pipe(
                  Effect.catchTag("NotFound", (error) =>
                    Effect.fail(invalidParam("endpoint", error.message, "resource_missing")),
                  ),
                );
              yield* requireEnabled(endpoint, "endpoint");
              targets = [endpoint.id];
            } else targets = yield* replayTargets(scope, event);
            if (targets.length === 0)
              return yield* invalidParam(
                "endpoint",
                `No enabled webhook endpoint receives ${event.type} events: subscribe one, or name one with \`endpoint\`.`,
                "webhook_endpoint_missing",
              );
            const ids = yield* store.insert(
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

      const sendTest = (scope: MerchantScope, endpointId: string) =>
        sql.withTransaction(
          Effect.gen(function* () {
            const endpoint = yield* endpoints.load(scope, endpointId);
            yield* requireEnabled(endpoint, "id");
            const [eventId] = yield* outbox.raise({
              merchantId: scope.merchantId,
              livemode: scope.livemode,
              type: "webhook.test",
              key: `webhook.test:${randomUUID()}`,
              object: {
                object: "webhook_test",
                endpoint: toEndpointObject(endpoint, yield* Clock.currentTimeMillis),
                message: "A test event sent from the API. It is not a payment: do not act on it.",
              },
            });
            if (eventId === undefined) return yield* Effect.die(new Error("webhook.test event not recorded"));
            const ids = yield* store.insert([
              { endpointId: endpoint.id, eventId, eventType: "webhook.test", trigger: "test" },
            ]);
            const [delivery] = yield* render(ids);
            return delivery as DeliveryObject;
          }),
        );

      return { list, replay, sendTest };
    }),
  );
}
