/**
 * The OpenAPI 3.1 document, generated from the route table and the same schemas that validate requests,
 * with each route's examples encoded by those schemas.
 * Each operation also gets the error examples of the code that refuses (input decoding, path params,
 * Idempotency-Key), and the introduction the error-code catalogue. Query parameters are described by the
 * value they decode to (`limit` an integer 1-100), not their text. The merchants' typed client
 * (`client/openapi.ts`) is generated from this document by openapi-typescript, which needs TypeScript's
 * JavaScript API (TypeScript 7 has none): hence the project's TypeScript 5.9.
 */
import { Result, Schema } from "effect";
import { MAX_BODY_BYTES } from "./app.ts";
import { ErrorBody } from "./error-response.ts";
import { errorExamples } from "./openapi-errors.ts";
import { apiIntroduction } from "./openapi-intro.ts";
import { RATE_LIMIT_HEADER_DOCS } from "./rate-limits.ts";
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

/**
 * An example as JSON, encoded with the schema that would encode the real value. One the schema refuses is
 * shown as written (the service still starts) and fails test/unit/openapi-examples.test.ts.
 */
const encodeExample = (schema: Schema.Top, value: unknown): unknown => {
  const encoded = Schema.encodeUnknownResult(schema as Schema.Codec<unknown, unknown>)(value);
  return Result.isSuccess(encoded) ? encoded.success : value;
};

const ERROR_STATUSES = {
  "400":
    "Invalid request: a parameter is missing, unknown or invalid; the body is not a JSON object; or Idempotency-Key is missing.",
  "401": "No valid API key.",
  "404": "No such object for this API key.",
  "409": "Idempotency-Key reused with a different request.",
  "413": `Body larger than ${MAX_BODY_BYTES} bytes.`,
  "415": "Body is not application/json.",
  "429":
    "Too many requests of this operation's class with this API key; `Retry-After` says when to try again.",
} as const;

/** Every answer to an authenticated request carries its class's request rate (http/rate-limits.ts). */
const rateLimitHeaders = Object.fromEntries(
  Object.keys(RATE_LIMIT_HEADER_DOCS).map((name) => [name, { $ref: `#/components/headers/${name}` }]),
);

export const buildOpenApi = <R>(routes: ReadonlyArray<AnyRoute<R>>, info: { readonly version: string }) => {
  const components: JsonObject = {};
  const schemaRef = (schema: Schema.Top, onExcessProperty: "ignore" | "error") => {
    const document = Schema.toJsonSchemaDocument(schema, { onExcessProperty });
    Object.assign(components, relink(document.definitions) as JsonObject);
    return relink(document.schema);
  };
  const errorRef = schemaRef(ErrorBody, "ignore");
  const errorResponses = (examples: ReturnType<typeof errorExamples>) =>
    Object.fromEntries(
      Object.entries(ERROR_STATUSES).map(([status, description]) => [
        status,
        {
          description,
          // Shown on the success and the 429 (every answer to an authenticated request carries them).
          ...(status === "429" ? { headers: rateLimitHeaders } : {}),
          content: {
            "application/json": {
              schema: errorRef,
              ...(examples[status] ? { examples: examples[status] } : {}),
            },
          },
        },
      ]),
    );

  const paths: Record<string, JsonObject> = {};
  for (const route of routes) {
    const parameters: Array<JsonObject> = [...route.path.matchAll(/\{(\w+)\}/g)].map(([, name = ""]) => ({
      name,
      in: "path",
      required: true,
      schema: { type: "string" },
      ...(route.examples.params?.[name] ? { example: route.examples.params[name] } : {}),
    }));
    if (route.method !== "POST" && route.body) {
      // A query parameter is described by the value it decodes to (`limit` an integer 1-100), as
      // OpenAPI's form style serializes it; the wire carries its text.
      const query = Schema.toJsonSchemaDocument(Schema.toType(route.body), { onExcessProperty: "error" });
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
        required: route.idempotentByContent !== true,
        schema: { type: "string" },
        example: "5f0c6a8e-2b1d-4e7a-9c3f-8d2e1b7a4c60",
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
          headers: rateLimitHeaders,
          content: {
            "application/json": {
              schema: schemaRef(route.response, "ignore"),
              example: encodeExample(route.response, route.examples.response),
            },
            // A download (`format=csv`): the rows streamed as CSV (`format=json` streams a JSON array).
            ...(route.download ? { "text/csv": { schema: { type: "string" } } } : {}),
          },
        },
        ...errorResponses(errorExamples(route)),
      },
    };
    if (route.method === "POST")
      operation.requestBody = {
        required: false,
        content: {
          "application/json": {
            schema: schemaRef(route.body ?? Schema.Struct({}), "error"),
            ...(route.body && route.examples.request !== undefined
              ? { example: encodeExample(route.body, route.examples.request) }
              : {}),
          },
        },
      };
    paths[route.path] = { ...paths[route.path], [route.method.toLowerCase()]: operation };
  }

  return {
    openapi: "3.1.0",
    info: {
      title: "Recurring billing and webhooks API",
      version: info.version,
      description: apiIntroduction(),
    },
    servers: [{ url: "/" }],
    security: [{ bearerAuth: [] }],
    paths,
    components: {
      securitySchemes: {
        bearerAuth: {
          type: "http",
          scheme: "bearer",
          description: "sk_test_… or sk_live_…; rk_test_… or rk_live_… (restricted: GET only)",
        },
      },
      schemas: components,
      headers: RATE_LIMIT_HEADER_DOCS,
    },
  };
};
