/** A webhook endpoint as stored, and as the API shows it (never with its secret, except once). */
import { Schema } from "effect";

export const ENDPOINT_STATUSES = ["enabled", "disabled"] as const;

export const EndpointRow = Schema.Struct({
  id: Schema.String,
  merchant_id: Schema.String,
  livemode: Schema.Boolean,
  url: Schema.String,
  events: Schema.Array(Schema.String),
  description: Schema.NullOr(Schema.String),
  status: Schema.Literals(ENDPOINT_STATUSES),
  previous_secret_expires_at: Schema.NullOr(Schema.Date),
  created_at: Schema.Date,
});
export type EndpointRow = typeof EndpointRow.Type;

export const ENDPOINT_COLUMNS = `w.id, w.merchant_id, w.livemode, w.url, w.events, w.description, w.status,
  w.previous_secret_expires_at, w.created_at`;

export const WebhookEndpointObject = Schema.Struct({
  id: Schema.String.annotate({ description: "we_…" }),
  object: Schema.Literal("webhook_endpoint"),
  url: Schema.String,
  events: Schema.Array(Schema.String).annotate({ description: "Event types delivered to this endpoint" }),
  description: Schema.NullOr(Schema.String),
  status: Schema.Literals(ENDPOINT_STATUSES).annotate({
    description: "`disabled`: nothing is sent; deliveries wait and resume when enabled again",
  }),
  previous_secret_expires: Schema.NullOr(Schema.Int).annotate({
    description:
      "After a rotation, until this time (Unix seconds) deliveries also carry a signature with the previous secret",
  }),
  created: Schema.Int.annotate({ description: "Unix seconds" }),
  livemode: Schema.Boolean,
}).annotate({ identifier: "WebhookEndpoint" });
export type WebhookEndpointObject = typeof WebhookEndpointObject.Type;

export const WebhookEndpointWithSecret = Schema.Struct({
  ...WebhookEndpointObject.fields,
  secret: Schema.String.annotate({
    description:
      "The signing secret (whsec_…): returned only in this response, store it now. HMAC-SHA256 key for X-Service-Signature.",
  }),
}).annotate({ identifier: "WebhookEndpointWithSecret" });

export const DeletedWebhookEndpoint = Schema.Struct({
  id: Schema.String,
  object: Schema.Literal("webhook_endpoint"),
  deleted: Schema.Literal(true),
}).annotate({ identifier: "DeletedWebhookEndpoint" });

const unix = (date: Date) => Math.floor(date.getTime() / 1000);

export const toEndpointObject = (row: EndpointRow, now: number): WebhookEndpointObject => ({
  id: row.id,
  object: "webhook_endpoint",
  url: row.url,
  events: row.events,
  description: row.description,
  status: row.status,
  previous_secret_expires:
    row.previous_secret_expires_at && row.previous_secret_expires_at.getTime() > now
      ? unix(row.previous_secret_expires_at)
      : null,
  created: unix(row.created_at),
  livemode: row.livemode,
});
