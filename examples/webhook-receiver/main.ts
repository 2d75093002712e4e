/**
 * Runs the example receiver:
 *   WEBHOOK_SECRET=whsec_… DATABASE_URL=postgres://… PORT=3000 npx node examples/webhook-receiver/main.ts
 * WEBHOOK_SECRET takes a comma-separated list during a rotation (new,previous). Then register
 * http://127.0.0.1:3000/webhooks as an endpoint with a test key.
 */
import { serve } from "@hono/node-server";
import { createReceiver, type ReceivedEvent } from "./app.ts";
import { createPostgresEventStore } from "./postgres-store.ts";

if (import.meta.main) {
  const secrets = (process.env.WEBHOOK_SECRET ?? "")
    .split(",")
    .map((secret) => secret.trim())
    .filter((secret) => secret !== "");
  const databaseUrl = process.env.DATABASE_URL;
  const port = Number(process.env.PORT ?? 3000);
  if (secrets.length === 0 || !databaseUrl || !Number.isInteger(port) || port < 0 || port > 65535) {
    console.error("Set WEBHOOK_SECRET (comma-separated during a rotation), DATABASE_URL and a valid PORT.");
    process.exit(2);
  }
  const store = await createPostgresEventStore(databaseUrl);
  const log = (what: string) => async (event: ReceivedEvent) => {
    console.log(`${event.type} ${event.id}: ${what}`);
  };
  const app = createReceiver({
    secrets,
    store,
    handlers: {
      // Fulfil on charge.released where escrow holds apply; charge.succeeded alone may still be returned.
      "charge.succeeded": log("payment received (held in escrow when the chain has holds)"),
      "charge.released": log("fulfil the order"),
      "charge.returned": log("the money went back to the customer: do not fulfil"),
      "mandate.authorized": log("the customer signed the mandate"),
      "mandate.insufficient": log("ask the customer to top up"),
      "mandate.requires_authorization": log("send the customer back to authorization_url"),
      "invoice.paid": log("extend the subscription"),
    },
    onTest: (event) => console.log(`webhook.test ${event.id}: test event received (not a payment)`),
    onError: (error, event) => console.error(`${event.type} ${event.id}: handling failed`, error),
  });
  const server = serve({ fetch: app.fetch, port }, (info) =>
    console.log(`webhook receiver on http://127.0.0.1:${info.port}/webhooks (${secrets.length} secret(s))`),
  );
  const stop = () => {
    server.close(() => {
      store.close().then(
        () => process.exit(0),
        () => process.exit(1),
      );
    });
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}
