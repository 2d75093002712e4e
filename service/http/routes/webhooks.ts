import { Effect, Schema } from "effect";
import { listOf } from "../../chains/objects.ts";
import { invalidParam } from "../../errors.ts";
import { EVENT_TYPES, EventTypeObject, eventTypeList } from "../../events/event-types.ts";
import { Deliveries, DeliveryObject, ListDeliveriesQuery, ReplayEvent } from "../../webhooks/deliveries.ts";
import {
  DeletedWebhookEndpoint,
  WebhookEndpointObject,
  WebhookEndpointWithSecret,
} from "../../webhooks/endpoint-object.ts";
import {
  CreateWebhookEndpoint,
  ListEndpointsQuery,
  RotateSecret,
  UpdateWebhookEndpoint,
  WebhookEndpoints,
} from "../../webhooks/endpoints.ts";
import { IDS, page } from "../examples/shared.ts";
import {
  createWebhookEndpoint,
  deletedWebhookEndpoint,
  delivery,
  replayEvent,
  replayedDelivery,
  rotatedWebhookEndpoint,
  rotateSecret,
  testDelivery,
  updatedWebhookEndpoint,
  updateWebhookEndpoint,
  webhookEndpoint,
  webhookEndpointWithSecret,
} from "../examples/webhooks.ts";
import { endpointIdParam, eventIdParam } from "../path-params.ts";
import { defineRoute } from "../route.ts";

const withEndpoints = Effect.service(WebhookEndpoints);
const withDeliveries = Effect.service(Deliveries);

export const webhookRoutes = [
  defineRoute({
    method: "GET",
    path: "/v1/event_types",
    operationId: "listEventTypes",
    tag: "Webhooks",
    summary: "List event types",
    description: "Every event type the service emits: the names webhook endpoints may subscribe to.",
    response: listOf(EventTypeObject, "EventTypeList"),
    examples: { response: eventTypeList() },
    handler: () => Effect.succeed(eventTypeList()),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/webhook_endpoints",
    operationId: "createWebhookEndpoint",
    tag: "Webhooks",
    summary: "Create a webhook endpoint",
    description:
      "Registers a webhook endpoint. The response carries its signing secret, shown only this once. Every name in `events` must be an emitted type (GET /v1/event_types); unknown names are refused with 400 `event_type_unknown` listing them. In live mode the URL must be https and must not point at localhost, private, loopback, link-local, CGNAT, unique-local, IPv4-mapped, unspecified or cloud-metadata addresses, however spelt, nor at a name resolving to one (400 `url_private` / `url_insecure`).",
    body: CreateWebhookEndpoint,
    response: WebhookEndpointWithSecret,
    examples: {
      request: createWebhookEndpoint,
      response: webhookEndpointWithSecret,
      errors: [
        invalidParam(
          "events",
          `Unknown event type: "charge.paid". The service emits: ${EVENT_TYPES.join(", ")} (GET /v1/event_types).`,
          "event_type_unknown",
        ),
      ],
    },
    handler: ({ caller, body }) =>
      Effect.flatMap(withEndpoints, (endpoints) => endpoints.create(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/webhook_endpoints",
    operationId: "listWebhookEndpoints",
    tag: "Webhooks",
    summary: "List webhook endpoints",
    description: "Your webhook endpoints, newest first (never with their secrets).",
    body: ListEndpointsQuery,
    response: listOf(WebhookEndpointObject, "WebhookEndpointList"),
    examples: { response: page(webhookEndpoint) },
    handler: ({ caller, body }) => Effect.flatMap(withEndpoints, (endpoints) => endpoints.list(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/webhook_endpoints/{id}",
    params: { id: endpointIdParam },
    operationId: "retrieveWebhookEndpoint",
    tag: "Webhooks",
    summary: "Retrieve a webhook endpoint",
    description: "Never with its secret.",
    response: WebhookEndpointObject,
    examples: { params: { id: IDS.webhookEndpoint }, response: webhookEndpoint },
    handler: ({ caller, params }) =>
      Effect.flatMap(withEndpoints, (endpoints) => endpoints.retrieve(caller, params.id ?? "")),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/webhook_endpoints/{id}",
    params: { id: endpointIdParam },
    operationId: "updateWebhookEndpoint",
    tag: "Webhooks",
    summary: "Update a webhook endpoint",
    description:
      "Changes an endpoint's url, events or description, or disables it (`disabled: true`) and enables it again.",
    body: UpdateWebhookEndpoint,
    response: WebhookEndpointObject,
    examples: {
      params: { id: IDS.webhookEndpoint },
      request: updateWebhookEndpoint,
      response: updatedWebhookEndpoint,
    },
    handler: ({ caller, body, params }) =>
      Effect.flatMap(withEndpoints, (endpoints) => endpoints.update(caller, params.id ?? "", body)),
  }),
  defineRoute({
    method: "DELETE",
    path: "/v1/webhook_endpoints/{id}",
    params: { id: endpointIdParam },
    operationId: "deleteWebhookEndpoint",
    tag: "Webhooks",
    summary: "Delete a webhook endpoint",
    description: "Nothing more is sent to it, pending deliveries included.",
    response: DeletedWebhookEndpoint,
    examples: { params: { id: IDS.webhookEndpoint }, response: deletedWebhookEndpoint },
    handler: ({ caller, params }) =>
      Effect.flatMap(withEndpoints, (endpoints) => endpoints.remove(caller, params.id ?? "")),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/webhook_endpoints/{id}/rotate_secret",
    params: { id: endpointIdParam },
    operationId: "rotateWebhookSecret",
    tag: "Webhooks",
    summary: "Rotate a webhook secret",
    description:
      "Replaces the signing secret; the new one is in this response only. Until `previous_secret_expires` (default 24 h, `expire_previous_after_seconds` 0-604800) deliveries carry two signatures, `v1=<new>,v1=<previous>`, so receivers can switch secrets without dropping a delivery.",
    body: RotateSecret,
    response: WebhookEndpointWithSecret,
    examples: {
      params: { id: IDS.webhookEndpoint },
      request: rotateSecret,
      response: rotatedWebhookEndpoint,
    },
    handler: ({ caller, body, params }) =>
      Effect.flatMap(withEndpoints, (endpoints) => endpoints.rotateSecret(caller, params.id ?? "", body)),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/webhook_endpoints/{id}/test",
    params: { id: endpointIdParam },
    operationId: "testWebhookEndpoint",
    tag: "Webhooks",
    summary: "Send a test event",
    description: "Sends a `webhook.test` event to this endpoint (not a payment; never act on it).",
    response: DeliveryObject,
    examples: {
      params: { id: IDS.webhookEndpoint },
      response: testDelivery,
      errors: [
        invalidParam(
          "id",
          `Webhook endpoint ${IDS.webhookEndpoint} is disabled: enable it first.`,
          "webhook_endpoint_disabled",
        ),
      ],
    },
    handler: ({ caller, params }) =>
      Effect.flatMap(withDeliveries, (deliveries) => deliveries.sendTest(caller, params.id ?? "")),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/webhook_endpoints/{id}/deliveries",
    params: { id: endpointIdParam },
    operationId: "listWebhookDeliveries",
    tag: "Webhooks",
    summary: "List webhook deliveries",
    description:
      "An endpoint's deliveries, newest first, each with its attempts and next retry; filter by status and event.",
    body: ListDeliveriesQuery,
    response: listOf(DeliveryObject, "WebhookDeliveryList"),
    examples: { params: { id: IDS.webhookEndpoint }, response: page(delivery) },
    handler: ({ caller, body, params }) =>
      Effect.flatMap(withDeliveries, (deliveries) => deliveries.list(caller, params.id ?? "", body)),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/events/{id}/replay",
    params: { id: eventIdParam },
    operationId: "replayEvent",
    tag: "Events",
    summary: "Replay an event",
    description: "Sends an event again, with the same id, as a new delivery to its endpoints.",
    body: ReplayEvent,
    response: Schema.Struct({
      object: Schema.Literal("list"),
      data: Schema.Array(DeliveryObject),
      has_more: Schema.Boolean,
    }).annotate({ identifier: "ReplayedDeliveries" }),
    examples: { params: { id: IDS.event }, request: replayEvent, response: page(replayedDelivery) },
    handler: ({ caller, body, params }) =>
      Effect.flatMap(withDeliveries, (deliveries) => deliveries.replay(caller, params.id ?? "", body)),
  }),
];
