/**
 * Webhook endpoints: where a merchant's events go. The URL is checked against the SSRF policy on every
 * write (live mode: public https addresses only, names resolved and checked), the event names against
 * the catalogue, and the signing secret is generated here, sealed at rest and shown once.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import type { Caller } from "../auth/api-keys.ts";
import { decodeRows, firstOr } from "../db/rows.ts";
import { type InvalidRequest, invalidParam, NotFound } from "../errors.ts";
import { newId } from "../ids.ts";
import { PageQuery, pageOf } from "../pagination.ts";
import {
  ENDPOINT_COLUMNS,
  EndpointRow,
  toEndpointObject,
  type WebhookEndpointObject,
} from "./endpoint-object.ts";
import { EVENT_TYPES, isEventType } from "./event-types.ts";
import { DELIVERIES_CHANNEL } from "./fan-out.ts";
import { generateSigningSecret, SecretBox } from "./secret-box.ts";
import {
  checkWebhookHost,
  PRIVATE_ALLOWED,
  PUBLIC_ONLY,
  parseWebhookUrl,
  systemResolve,
} from "./url-policy.ts";

export const MAX_ROTATION_OVERLAP_SECONDS = 7 * 24 * 3600;
export const DEFAULT_ROTATION_OVERLAP_SECONDS = 24 * 3600;

const Url = Schema.String.check(Schema.isBetweenLength(1, 2048)).annotate({
  description: "Where events are POSTed. Live mode: https and a public address only.",
});
const EventNames = Schema.Array(Schema.String.check(Schema.isBetweenLength(1, 100)))
  .check(Schema.isMinLength(1), Schema.isMaxLength(100))
  .annotate({ description: "Event types to receive; each one of GET /v1/event_types" });
const Description = Schema.NullOr(Schema.String.check(Schema.isBetweenLength(1, 500)));

export const CreateWebhookEndpoint = Schema.Struct({
  url: Url,
  events: EventNames,
  description: Schema.optionalKey(Description),
}).annotate({ identifier: "CreateWebhookEndpointRequest" });
export type CreateWebhookEndpoint = typeof CreateWebhookEndpoint.Type;

export const UpdateWebhookEndpoint = Schema.Struct({
  url: Schema.optionalKey(Url),
  events: Schema.optionalKey(EventNames),
  description: Schema.optionalKey(Description),
  disabled: Schema.optionalKey(
    Schema.Boolean.annotate({ description: "true: stop sending (deliveries wait); false: resume" }),
  ),
}).annotate({ identifier: "UpdateWebhookEndpointRequest" });
export type UpdateWebhookEndpoint = typeof UpdateWebhookEndpoint.Type;

export const RotateSecret = Schema.Struct({
  expire_previous_after_seconds: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 0, maximum: MAX_ROTATION_OVERLAP_SECONDS })).annotate({
      description: `How long deliveries keep a second signature made with the previous secret: 0-${MAX_ROTATION_OVERLAP_SECONDS}, default ${DEFAULT_ROTATION_OVERLAP_SECONDS} (24 h)`,
    }),
  ),
}).annotate({ identifier: "RotateWebhookSecretRequest" });
export type RotateSecret = typeof RotateSecret.Type;

export const ListEndpointsQuery = Schema.Struct({ ...PageQuery.fields }).annotate({
  identifier: "ListWebhookEndpointsQuery",
});
export type ListEndpointsQuery = typeof ListEndpointsQuery.Type;

const decodeEndpoints = decodeRows(EndpointRow);

export const notFoundEndpoint = (id: string) =>
  new NotFound({
    code: "resource_missing",
    message: `No such webhook endpoint: '${id.slice(0, 80)}'`,
    param: "id",
  });

/** Every name must be one the service emits; the error lists the unknown ones. Duplicates collapse. */
export const checkEventNames = (names: readonly string[]): Effect.Effect<string[], InvalidRequest> => {
  const unknown = [...new Set(names.filter((name) => !isEventType(name)))];
  if (unknown.length > 0)
    return Effect.fail(
      invalidParam(
        "events",
        `Unknown event type${unknown.length > 1 ? "s" : ""}: ${unknown
          .slice(0, 10)
          .map((name) => JSON.stringify(name.slice(0, 100)))
          .join(", ")}. The service emits: ${EVENT_TYPES.join(", ")} (GET /v1/event_types).`,
        "event_type_unknown",
      ),
    );
  return Effect.succeed([...new Set(names)]);
};

export interface EndpointPolicy {
  /** Test-mode endpoints may point at localhost and private addresses (a local deployment). */
  readonly allowPrivateInTest: boolean;
}

export class WebhookEndpoints extends Context.Service<
  WebhookEndpoints,
  {
    readonly create: (
      caller: Caller,
      input: CreateWebhookEndpoint,
    ) => Effect.Effect<WebhookEndpointObject & { secret: string }, InvalidRequest | SqlError.SqlError>;
    readonly list: (
      caller: Caller,
      query: ListEndpointsQuery,
    ) => Effect.Effect<
      { object: "list"; data: WebhookEndpointObject[]; has_more: boolean },
      SqlError.SqlError
    >;
    readonly load: (caller: Caller, id: string) => Effect.Effect<EndpointRow, NotFound | SqlError.SqlError>;
    readonly retrieve: (
      caller: Caller,
      id: string,
    ) => Effect.Effect<WebhookEndpointObject, NotFound | SqlError.SqlError>;
    readonly update: (
      caller: Caller,
      id: string,
      input: UpdateWebhookEndpoint,
    ) => Effect.Effect<WebhookEndpointObject, InvalidRequest | NotFound | SqlError.SqlError>;
    readonly remove: (
      caller: Caller,
      id: string,
    ) => Effect.Effect<
      { id: string; object: "webhook_endpoint"; deleted: true },
      NotFound | SqlError.SqlError
    >;
    readonly rotateSecret: (
      caller: Caller,
      id: string,
      input: RotateSecret,
    ) => Effect.Effect<WebhookEndpointObject & { secret: string }, NotFound | SqlError.SqlError>;
    readonly render: (row: EndpointRow) => Effect.Effect<WebhookEndpointObject>;
  }
>()("WebhookEndpoints") {
  static readonly layer = (policy: EndpointPolicy) =>
    Layer.effect(
      WebhookEndpoints,
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient;
        const box = yield* SecretBox;

        const textArray = (values: readonly string[]) =>
          sql`ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(values)}::jsonb))`;

        const render = (row: EndpointRow) =>
          Effect.map(Clock.currentTimeMillis, (now) => toEndpointObject(row, now));

        const checkUrl = (caller: Caller, raw: string) =>
          Effect.gen(function* () {
            const parsed = parseWebhookUrl(raw, { requireHttps: caller.livemode });
            if (!parsed.ok)
              return yield* Effect.fail(invalidParam("url", parsed.refusal.message, parsed.refusal.code));
            // Every mode: test mode on a local deployment allows loopback and private addresses too.
            const scope = !caller.livemode && policy.allowPrivateInTest ? PRIVATE_ALLOWED : PUBLIC_ONLY;
            const host = yield* Effect.promise(() => checkWebhookHost(parsed.url, systemResolve, scope));
            if (!host.ok)
              return yield* Effect.fail(invalidParam("url", host.refusal.message, host.refusal.code));
            return parsed.url.href;
          });

        const load = (caller: Caller, id: string) =>
          sql`SELECT ${sql.unsafe(ENDPOINT_COLUMNS)} FROM billing.webhook_endpoints
              WHERE id = ${id} AND merchant_id = ${caller.merchantId} AND livemode = ${caller.livemode}
                AND deleted_at IS NULL`.pipe(
            Effect.flatMap(decodeEndpoints),
            Effect.flatMap(firstOr(() => notFoundEndpoint(id))),
          );

        const create = (caller: Caller, input: CreateWebhookEndpoint) =>
          Effect.gen(function* () {
            const url = yield* checkUrl(caller, input.url);
            const events = yield* checkEventNames(input.events);
            const id = yield* newId("webhookEndpoint");
            const secret = generateSigningSecret();
            const now = new Date(yield* Clock.currentTimeMillis);
            const rows = yield* sql`
              INSERT INTO billing.webhook_endpoints
                (id, merchant_id, livemode, url, events, description, status, secret_ciphertext, created_at, updated_at)
              VALUES (${id}, ${caller.merchantId}, ${caller.livemode}, ${url}, ${textArray(events)},
                      ${input.description ?? null}, 'enabled', ${box.seal(secret, id)}, ${now}, ${now})
              RETURNING ${sql.unsafe(ENDPOINT_COLUMNS)}`.pipe(Effect.flatMap(decodeEndpoints));
            const row = rows[0] as EndpointRow;
            return { ...(yield* render(row)), secret };
          });

        const list = (caller: Caller, query: ListEndpointsQuery) =>
          Effect.gen(function* () {
            const limit = query.limit ?? 10;
            const after = query.starting_after ?? null;
            const rows = yield* sql`
              SELECT ${sql.unsafe(ENDPOINT_COLUMNS)} FROM billing.webhook_endpoints
              WHERE merchant_id = ${caller.merchantId} AND livemode = ${caller.livemode} AND deleted_at IS NULL
                AND (${after}::text IS NULL OR id < ${after})
              ORDER BY id DESC LIMIT ${limit + 1}`.pipe(Effect.flatMap(decodeEndpoints));
            const page = pageOf(rows, limit);
            return { ...page, data: yield* Effect.forEach(page.data, render) };
          });

        const update = (caller: Caller, id: string, input: UpdateWebhookEndpoint) =>
          Effect.gen(function* () {
            const current = yield* load(caller, id);
            const url = input.url === undefined ? current.url : yield* checkUrl(caller, input.url);
            const events = input.events === undefined ? current.events : yield* checkEventNames(input.events);
            const description = input.description === undefined ? current.description : input.description;
            const status =
              input.disabled === undefined ? current.status : input.disabled ? "disabled" : "enabled";
            const rows = yield* sql`
              UPDATE billing.webhook_endpoints
              SET url = ${url}, events = ${textArray(events)}, description = ${description},
                  status = ${status}, updated_at = now()
              WHERE id = ${id} AND deleted_at IS NULL
              RETURNING ${sql.unsafe(ENDPOINT_COLUMNS)}`.pipe(Effect.flatMap(decodeEndpoints));
            const row = rows[0];
            if (!row) return yield* Effect.fail(notFoundEndpoint(id));
            // Re-enabling wakes the dispatchers for the deliveries that waited.
            if (status === "enabled" && current.status === "disabled")
              yield* sql`SELECT pg_notify(${DELIVERIES_CHANNEL}, '')`;
            return yield* render(row);
          });

        const remove = (caller: Caller, id: string) =>
          sql.withTransaction(
            Effect.gen(function* () {
              yield* load(caller, id);
              yield* sql`UPDATE billing.webhook_endpoints SET deleted_at = now(), updated_at = now() WHERE id = ${id}`;
              // Nothing more is sent to a deleted endpoint.
              yield* sql`UPDATE billing.webhook_deliveries SET status = 'failed', next_attempt_at = NULL
                         WHERE endpoint_id = ${id} AND status = 'pending'`;
              return { id, object: "webhook_endpoint" as const, deleted: true as const };
            }),
          );

        const rotateSecret = (caller: Caller, id: string, input: RotateSecret) =>
          Effect.gen(function* () {
            yield* load(caller, id);
            const secret = generateSigningSecret();
            const overlap = input.expire_previous_after_seconds ?? DEFAULT_ROTATION_OVERLAP_SECONDS;
            const now = yield* Clock.currentTimeMillis;
            const expires = overlap > 0 ? new Date(now + overlap * 1000) : null;
            const rows = yield* sql`
              UPDATE billing.webhook_endpoints
              SET previous_secret_ciphertext = CASE WHEN ${expires}::timestamptz IS NULL THEN NULL ELSE secret_ciphertext END,
                  previous_secret_expires_at = ${expires},
                  secret_ciphertext = ${box.seal(secret, id)},
                  updated_at = now()
              WHERE id = ${id} AND deleted_at IS NULL
              RETURNING ${sql.unsafe(ENDPOINT_COLUMNS)}`.pipe(Effect.flatMap(decodeEndpoints));
            const row = rows[0];
            if (!row) return yield* Effect.fail(notFoundEndpoint(id));
            return { ...(yield* render(row)), secret };
          });

        return {
          create,
          list,
          load,
          retrieve: (caller: Caller, id: string) => Effect.flatMap(load(caller, id), render),
          update,
          remove,
          rotateSecret,
          render,
        };
      }),
    );
}
