/** The OpenAPI 3.1 document, generated from the route table and the same schemas that validate requests. */
import { Schema } from "effect";
import { MAX_BODY_BYTES } from "./app.ts";
import { ErrorBody } from "./error-response.ts";
import type { AnyRoute } from "./route.ts";

type JsonObject = Record<string, unknown>;

const relink = (value: unknown): unknown => {
  if (Array.isArray(value)) return value.map(relink);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.entries(value as JsonObject).map(([k, v]) => [
        k,
        k === "$ref" && typeof v === "string" ? v.replace("#/$defs/", "#/components/schemas/") : relink(v),
      ]),
    );
  }
  return value;
};

const ERROR_STATUSES = {
  "400":
    "Invalid request: a parameter is missing, unknown or invalid; the body is not a JSON object; or Idempotency-Key is missing.",
  "401": "No valid API key.",
  "404": "No such object for this API key.",
  "409": "Idempotency-Key reused with a different request.",
  "413": `Body larger than ${MAX_BODY_BYTES} bytes.`,
  "415": "Body is not application/json.",
} as const;

export const buildOpenApi = <R>(routes: ReadonlyArray<AnyRoute<R>>, info: { readonly version: string }) => {
  const components: JsonObject = {};
  const schemaRef = (schema: Schema.Top, onExcessProperty: "ignore" | "error") => {
    const document = Schema.toJsonSchemaDocument(schema, { onExcessProperty });
    Object.assign(components, relink(document.definitions) as JsonObject);
    return relink(document.schema);
  };
  const errorRef = schemaRef(ErrorBody, "ignore");
  const errorResponses = Object.fromEntries(
    Object.entries(ERROR_STATUSES).map(([status, description]) => [
      status,
      { description, content: { "application/json": { schema: errorRef } } },
    ]),
  );

  const paths: Record<string, JsonObject> = {};
  for (const route of routes) {
    const parameters = [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => ({
      name: m[1],
      in: "path",
      required: true,
      schema: { type: "string" },
    }));
    if (route.method !== "POST" && route.body) {
      const query = Schema.toJsonSchemaDocument(route.body, { onExcessProperty: "error" });
      Object.assign(components, relink(query.definitions) as JsonObject);
      const resolved = (
        typeof (query.schema as JsonObject).$ref === "string"
          ? (query.definitions as JsonObject)[
              String((query.schema as JsonObject).$ref).replace("#/$defs/", "")
            ]
          : query.schema
      ) as { properties?: Record<string, unknown>; required?: string[] };
      for (const [name, schema] of Object.entries(resolved.properties ?? {}))
        parameters.push({
          name,
          in: "query",
          required: (resolved.required ?? []).includes(name),
          schema: relink(schema) as { type: string },
        });
    }
    if (route.method === "POST")
      parameters.push({
        name: "Idempotency-Key",
        in: "header",
        required: true,
        schema: { type: "string" },
      });
    const operation: JsonObject = {
      operationId: route.operationId,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: [route.tag],
      parameters,
      responses: {
        [String(route.status ?? 200)]: {
          description: "Success",
          content: { "application/json": { schema: schemaRef(route.response, "ignore") } },
        },
        ...errorResponses,
      },
    };
    if (route.method === "POST")
      operation.requestBody = {
        required: false,
        content: { "application/json": { schema: schemaRef(route.body ?? Schema.Struct({}), "error") } },
      };
    paths[route.path] = { ...paths[route.path], [route.method.toLowerCase()]: operation };
  }

  return {
    openapi: "3.1.0",
    info: {
      title: "Recurring billing and webhooks API",
      version: info.version,
      description:
        "Mandates, charges, subscriptions and signed webhook events on our escrow contract. Every object has `livemode`; every POST needs `Idempotency-Key`.",
    },
    servers: [{ url: "/" }],
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      securitySchemes: {
        bearerAuth: { type: "http", scheme: "bearer", description: "sk_test_… or sk_live_…" },
      },
      schemas: components,
    },
  };
};
