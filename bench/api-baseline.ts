/**
 * The baseline of `npm run bench:api`: bare Hono on @hono/node-server, in its own Node process, doing
 * only the database work each measured route needs, with the service's own Postgres client
 * (@effect/sql-pg, a pool of the service's size) on the same database. No authentication, validation,
 * idempotency logic, logging or metrics: what is left is the floor for that route on this machine.
 *
 * - `GET /v1/mandates/:id`: one select by primary key (scoped to the merchant, as the service reads).
 * - `GET /v1/mandates?limit=N`: one select on the (merchant_id, livemode, id DESC) index with a limit.
 * - `POST /v1/mandates`: in one transaction, an idempotency record and a mandate inserted.
 *
 * Configured by one JSON argument; prints `listening <port>` once it serves.
 */
import { createHash, randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import { PgClient } from "@effect/sql-pg";
import { serve } from "@hono/node-server";
import { Effect, ManagedRuntime, Redacted } from "effect";
import { Hono } from "hono";
import { fixed } from "../service/db/query.ts";
import { MANDATE_COLUMNS } from "../service/mandates/mandate-object.ts";

export interface BaselineConfig {
  readonly databaseUrl: string;
  readonly poolSize: number;
  readonly merchantId: string;
  readonly apiKeyId: string;
  /** Terms copied into every inserted mandate (a real mandate's). */
  readonly terms: {
    readonly chain_id: number;
    readonly token_address: string;
    readonly payee_address: string;
    readonly operator_address: string;
  };
}

const config = JSON.parse(process.argv[2] ?? "{}") as BaselineConfig;
const runtime = ManagedRuntime.make(
  PgClient.layer({ url: Redacted.make(config.databaseUrl), maxConnections: config.poolSize }),
);
const sql = await runtime.runPromise(Effect.service(PgClient.PgClient));
const columns = fixed(MANDATE_COLUMNS);

const app = new Hono();
app.get("/v1/mandates/:id", async (c) => {
  const rows = await runtime.runPromise(
    sql`SELECT ${columns} FROM billing.mandates
        WHERE id = ${c.req.param("id")} AND merchant_id = ${config.merchantId} AND livemode = false`,
  );
  return rows[0] === undefined ? c.json({ error: "not found" }, 404) : c.json(rows[0]);
});
app.get("/v1/mandates", async (c) => {
  const limit = Number(c.req.query("limit") ?? 10);
  const rows = await runtime.runPromise(
    sql`SELECT ${columns} FROM billing.mandates WHERE merchant_id = ${config.merchantId} AND livemode = false
        ORDER BY id DESC LIMIT ${limit + 1}`,
  );
  return c.json({ object: "list", data: rows.slice(0, limit), has_more: rows.length > limit });
});
app.post("/v1/mandates", async (c) => {
  const text = await c.req.text();
  const body = JSON.parse(text) as { customer: string; cap_decimal: string };
  const key = c.req.header("idempotency-key") ?? randomBytes(16).toString("hex");
  const id = `mdt_${randomBytes(12).toString("hex")}`;
  const mandate = {
    id,
    merchant_id: config.merchantId,
    livemode: false,
    origin: "api",
    ...config.terms,
    cap: (BigInt(Math.round(Number(body.cap_decimal) * 100)) * 10_000n).toString(),
    period: "month",
    approval_periods: 12,
    customer: body.customer,
    hold_seconds: 0,
    anchor: Math.floor(Date.now() / 1000),
    salt: BigInt(`0x${randomBytes(12).toString("hex")}`).toString(),
    authorization_token: randomBytes(24).toString("base64url"),
    status: "pending",
  };
  const responseBody = JSON.stringify(mandate);
  await runtime.runPromise(
    sql.withTransaction(
      Effect.gen(function* () {
        yield* sql`INSERT INTO billing.idempotency_keys ${sql.insert({
          api_key_id: config.apiKeyId,
          key,
          request_sha256: createHash("sha256").update(text).digest(),
          method: "POST",
          path: "/v1/mandates",
          status: 201,
          response_body: responseBody,
        })}`;
        yield* sql`INSERT INTO billing.mandates ${sql.insert(mandate)}`;
      }),
    ),
  );
  return c.body(responseBody, 201, { "content-type": "application/json" });
});

const server = serve({ fetch: app.fetch, hostname: "127.0.0.1", port: 0 }, (info: AddressInfo) => {
  process.stdout.write(`listening ${info.port}\n`);
});
process.once("SIGTERM", () => {
  server.close();
  void runtime.dispose().then(() => process.exit(0));
});
