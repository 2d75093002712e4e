/** Examples of the webhook endpoint, delivery and replay routes. */
import type { DeliveryObject, ReplayEvent } from "../../webhooks/deliveries.ts";
import type { WebhookEndpointObject } from "../../webhooks/endpoint-object.ts";
import type { CreateWebhookEndpoint, RotateSecret, UpdateWebhookEndpoint } from "../../webhooks/endpoints.ts";
import { at, IDS } from "./shared.ts";

export const createWebhookEndpoint: CreateWebhookEndpoint = {
  url: "https://shop.example.com/webhooks/billing",
  events: ["charge.released", "invoice.paid", "mandate.insufficient", "payment.paid"],
  description: "Order fulfilment",
};

export const webhookEndpoint: WebhookEndpointObject = {
  id: IDS.webhookEndpoint,
  object: "webhook_endpoint",
  url: "https://shop.example.com/webhooks/billing",
  events: ["charge.released", "invoice.paid", "mandate.insufficient", "payment.paid"],
  description: "Order fulfilment",
  status: "enabled",
  previous_secret_expires: null,
  created: at(10),
  livemode: false,
};

/** The secret appears in this response only. */
export const webhookEndpointWithSecret = {
  ...webhookEndpoint,
  secret: "whsec_BwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyAhIiMkJSY",
};

export const updateWebhookEndpoint: UpdateWebhookEndpoint = {
  events: ["charge.released", "charge.returned", "invoice.paid", "mandate.insufficient", "payment.paid"],
};

export const updatedWebhookEndpoint: WebhookEndpointObject = {
  ...webhookEndpoint,
  events: ["charge.released", "charge.returned", "invoice.paid", "mandate.insufficient", "payment.paid"],
};

export const rotateSecret: RotateSecret = { expire_previous_after_seconds: 86_400 };

export const rotatedWebhookEndpoint = {
  ...webhookEndpoint,
  previous_secret_expires: at(20_000) + 86_400,
  secret: "whsec_c2VjcmV0LXJvdGF0ZWQtZXhhbXBsZS1vbmx5LTAwMDE",
};

export const deletedWebhookEndpoint = {
  id: IDS.webhookEndpoint,
  object: "webhook_endpoint" as const,
  deleted: true as const,
};

/** A delivery of the charge's event that failed once and then succeeded. */
export const delivery: DeliveryObject = {
  id: IDS.delivery,
  object: "webhook_delivery",
  endpoint: IDS.webhookEndpoint,
  event: IDS.event,
  event_type: "charge.succeeded",
  trigger: "event",
  status: "succeeded",
  attempt_count: 2,
  next_attempt: null,
  attempts: [
    {
      number: 1,
      attempted: at(3701),
      status_code: 503,
      duration_ms: 87,
      error: null,
      response_body: "Service Unavailable",
    },
    { number: 2, attempted: at(3761), status_code: 200, duration_ms: 42, error: null, response_body: "ok" },
  ],
  created: at(3701),
  livemode: false,
};

/** As POST /v1/webhook_endpoints/{id}/test answers: queued, sent within a second. */
export const testDelivery: DeliveryObject = {
  id: IDS.testDelivery,
  object: "webhook_delivery",
  endpoint: IDS.webhookEndpoint,
  event: IDS.testEvent,
  event_type: "webhook.test",
  trigger: "test",
  status: "pending",
  attempt_count: 0,
  next_attempt: at(9100),
  attempts: [],
  created: at(9100),
  livemode: false,
};

export const replayEvent: ReplayEvent = { endpoint: IDS.webhookEndpoint };

export const replayedDelivery: DeliveryObject = {
  ...delivery,
  id: IDS.replayedDelivery,
  trigger: "replay",
  status: "pending",
  attempt_count: 0,
  next_attempt: at(9200),
  attempts: [],
  created: at(9200),
};
