/**
 * Webhook endpoints: where a merchant's events go. The URL is checked against the SSRF policy on every
 * write (live mode: public https addresses only, names resolved and checked), the event names against
 * the catalogue, and the signing secret is generated here, sealed at rest and shown once.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { type Page, pageRows, relation, selectRows } from "../db/query.ts";
import { firstOr } from "../db/rows.ts";
import { type InvalidRequest, invalidParam, type NotFound, resourceMissing } from "../errors.ts";
import { EVENT_TYPES, isEventType } from "../events/event-types.ts";
import { newId } from "../ids.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { PageQuery } from "../pagination.ts";
import { DELIVERIES_CHANNEL, DeliveryStore } from "./delivery-store.ts";
import {
  ENDPOINT_COLUMNS,
  EndpointRow,
  toEndpointObject,
  type WebhookEndpointObject,
} from "./endpoint-object.ts";
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

/** The merchant's endpoints that were not deleted. */
const ENDPOINTS = relation({
  from: "billing.webhook_endpoints w",
  alias: "w",
  columns: ENDPOINT_COLUMNS,
  row: EndpointRow,
});
const notFoundEndpoint = (id: string) => resourceMissing("webhook endpoint", id);

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
      scope: MerchantScope,
      input: CreateWebhookEndpoint,
    ) => Effect.Effect<WebhookEndpointObject & { secret: string }, InvalidRequest | SqlError.SqlError>;
    readonly list: (
      scope: MerchantScope,
      query: ListEndpointsQuery,
    ) => Effect.Effect<Page<WebhookEndpointObject>, InvalidRequest | SqlError.SqlError>;
    readonly load: (
      scope: MerchantScope,
      id: string,
    ) => Effect.Effect<EndpointRow, NotFound | SqlError.SqlError>;
    readonly retrieve: (
      scope: MerchantScope,
      id: string,
    ) => Effect.Effect<WebhookEndpointObject, NotFound | SqlError.SqlError>;
    readonly update: (
      scope: MerchantScope,
      id: string,
      input: UpdateWebhookEndpoint,
    ) => Effect.Effect<WebhookEndpointObject, InvalidRequest | NotFound | SqlError.SqlError>;
    readonly remove: (
      scope: MerchantScope,
      id: string,
    ) => Effect.Effect<
      { id: string; object: "webhook_endpoint"; deleted: true },
      NotFound | SqlError.SqlError
    >;
    readonly rotateSecret: (
      scope: MerchantScope,
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
        const deliveries = yield* DeliveryStore;
        const inScope = (scope: MerchantScope) => [
          sql`w.merchant_id = ${scope.merchantId}`,
          sql`w.livemode = ${scope.livemode}`,
          sql`w.deleted_at IS NULL`,
        ];
        const returning = sql`RETURNING ${ENDPOINTS.columns}`;

        const textArray = (values: readonly string[]) =>
          sql`ARRAY(SELECT jsonb_array_elements_text(${JSON.stringify(values)}::jsonb))`;

        const render = (row: EndpointRow) =>
          Effect.map(Clock.currentTimeMillis, (now) => toEndpointObject(row, now));

        const checkUrl = (scope: MerchantScope, raw: string) =>
          Effect.gen(function* () {
            const parsed = parseWebhookUrl(raw, { requireHttps: scope.livemode });
            if (!parsed.ok)
              return yield* Effect.fail(invalidParam("url", parsed.refusal.message, parsed.refusal.code));
            // Every mode: test mode on a local deployment allows loopback and private addresses too.
            const addresses = !scope.livemode && policy.allowPrivateInTest ? PRIVATE_ALLOWED : PUBLIC_ONLY;
            const host = yield* Effect.promise(() => checkWebhookHost(parsed.url, systemResolve, addresses));
            if (!host.ok)
              return yield* Effect.fail(invalidParam("url", host.refusal.message, host.refusal.code));
            return parsed.url.href;
          });

        const load = (scope: MerchantScope, id: string) =>
          selectRows(sql, ENDPOINTS, [sql`w.id = ${id}`, ...inScope(scope)]).pipe(
            Effect.flatMap(firstOr(() => notFoundEndpoint(id))),
          );

        const create = (scope: MerchantScope, input: CreateWebhookEndpoint) =>
          Effect.gen(function* () {
            const url = yield* checkUrl(scope, input.url);
            const events = yield* checkEventNames(input.events);
            const id = yield* newId("webhookEndpoint");
            const secret = generateSigningSecret();
            const now = new Date(yield* Clock.currentTimeMillis);
            const rows = yield* sql`
              INSERT INTO billing.webhook_endpoints AS w
                (id, merchant_id, livemode, url, events, description, status, secret_ciphertext, created_at, updated_at)
              VALUES (${id}, ${scope.merchantId}, ${scope.livemode}, ${url}, ${textArray(events)},
                      ${input.description ?? null}, 'enabled', ${box.seal(secret, id)}, ${now}, ${now})
              ${returning}`.pipe(Effect.flatMap(ENDPOINTS.decode));
            const row = rows[0] as EndpointRow;
            return { ...(yield* render(row)), secret };
          });

        const list = (scope: MerchantScope, query: ListEndpointsQuery) =>
          Effect.gen(function* () {
            const page = yield* pageRows(sql, ENDPOINTS, inScope(scope), query);
            return { ...page, data: yield* Effect.forEach(page.data, render) };
          });

        const update = (scope: MerchantScope, id: string, input: UpdateWebhookEndpoint) =>
          Effect.gen(function* () {
            const current = yield* load(scope, id);
            const url = input.url === undefined ? current.url : yield* checkUrl(scope, input.url);
            const events = input.events === undefined ? current.events : yield* checkEventNames(input.events);
            const description = input.description === undefined ? current.description : input.description;
            const status =
              input.disabled === undefined ? current.status : input.disabled ? "disabled" : "enabled";
            const rows = yield* sql`
              UPDATE billing.webhook_endpoints w
              SET url = ${url}, events = ${textArray(events)}, description = ${description},
                  status = ${status}, updated_at = now()
              WHERE w.id = ${id} AND w.deleted_at IS NULL
              ${returning}`.pipe(Effect.flatMap(ENDPOINTS.decode));
            const row = rows[0];
            if (!row) return yield* Effect.fail(notFoundEndpoint(id));
            // Re-enabling wakes the dispatchers for the deliveries that waited.
            if (status === "enabled" && current.status === "disabled")
              yield* sql`SELECT pg_notify(${DELIVERIES_CHANNEL}, '')`;
            return yield* render(row);
          });

        const remove = (scope: MerchantScope, id: string) =>
          sql.withTransaction(
            Effect.gen(function* () {
              yield* load(scope, id);
              yield* sql`UPDATE billing.webhook_endpoints SET deleted_at = now(), updated_at = now() WHERE id = ${id}`;
              yield* deliveries.failPendingOf(id);
              return { id, object: "webhook_endpoint" as const, deleted: true as const };
            }),
          );

        const rotateSecret = (scope: MerchantScope, id: string, input: RotateSecret) =>
          Effect.gen(function* () {
            yield* load(scope, id);
            const secret = generateSigningSecret();
            const overlap = input.expire_previous_after_seconds ?? DEFAULT_ROTATION_OVERLAP_SECONDS;
            const now = yield* Clock.currentTimeMillis;
            const expires = overlap > 0 ? new Date(now + overlap * 1000) : null;
            const rows = yield* sql`
              UPDATE billing.webhook_endpoints w
              SET previous_secret_ciphertext = CASE WHEN ${expires}::timestamptz IS NULL THEN NULL ELSE secret_ciphertext END,
                  previous_secret_expires_at = ${expires},
                  secret_ciphertext = ${box.seal(secret, id)},
                  updated_at = now()
              WHERE w.id = ${id} AND w.deleted_at IS NULL
              ${returning}`.pipe(Effect.flatMap(ENDPOINTS.decode));
            const row = rows[0];
            if (!row) return yield* Effect.fail(notFoundEndpoint(id));
            return { ...(yield* render(row)), secret };
          });

        return {
          create,
          list,
          load,
          retrieve: (scope: MerchantScope, id: string) => Effect.flatMap(load(scope, id), render),
          update,
          remove,
          rotateSecret,
          render,
        };
      }),
    );
}
