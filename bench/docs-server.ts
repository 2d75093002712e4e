/**
 * The server of `npm run bench:docs`, in a process of its own so that its memory is only its own: the
 * documentation routes (`/v1/openapi.json`, `/docs`, Scalar's bundle) exactly as the service registers
 * them (registerOperationalRoutes, the service's OpenAPI document) on @hono/node-server. Prints
 * `listening <port>` once it serves.
 */
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { buildOpenApi } from "../service/http/openapi.ts";
import { registerOperationalRoutes } from "../service/http/operational-routes.ts";
import { routes, VERSION } from "../service/main.ts";

const app = new Hono();
registerOperationalRoutes(app, {
  readiness: async () => ({ ready: true, checks: {} }),
  openapi: buildOpenApi(routes, { version: VERSION }),
});
const server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, (info: AddressInfo) => {
  process.stdout.write(`listening ${info.port}\n`);
});
process.once("SIGTERM", () => server.close(() => process.exit(0)));
