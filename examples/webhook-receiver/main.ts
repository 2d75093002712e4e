/**
 * Run the example receiver: WEBHOOK_SECRET (comma-separated during a rotation), DATABASE_URL, PORT.
 *   WEBHOOK_SECRET=whsec_… DATABASE_URL=postgres://… PORT=3000 node examples/webhook-receiver/main.ts
 * then register http://127.0.0.1:3000/webhooks with a test key.
 */
import { serve } from "@hono/node-server";
import { createReceiver } from "./app.ts";
import { createPostgresEventStore } from "./postgres-store.ts";

if (import.meta.main) {
  const secrets = (process.env.WEBHOOK_SECRET ?? "").split(",").filter((s) => s !== "");
  const databaseUrl = process.env.DATABASE_URL;
  if (secrets.length === 0 || !databaseUrl) {
    console.error("Set WEBHOOK_SECRET and DATABASE_URL.");
    process.exit(2);
  }
  const store = await createPostgresEventStore(databaseUrl);
  const log = (what: string) => async (event: { id: string; type: string }) => {
    console.log(`${what}: ${event.type} ${event.id}`);
  };
  const app = createReceiver({
    secrets,
    store,
    handlers: {
      // Fulfil on charge.released where escrow holds apply, not on charge.succeeded.
      "charge.released": log("fulfil"),
      "mandate.insufficient": log("ask the customer to top up"),
      "mandate.requires_authorization": log("send the customer back to authorization_url"),
    },
    onTest: (event) => console.log(`test event ${event.id} received (not a payment)`),
    onError: (error, event) => console.error(`handling ${event.id} failed`, error),
  });
  serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 3000) });
}
