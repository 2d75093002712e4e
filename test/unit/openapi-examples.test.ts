/**
 * The API reference's examples: every operation of the OpenAPI document has a request example (when it
 * takes a body), a success example and error examples, and each decodes with the route's own schemas
 * (the request with the service's request decoding, unknown keys refused), so a renamed or retyped
 * field fails here. The error-code catalogue is in the document's introduction.
 */
import { Result, Schema } from "effect";
import { describe, expect, it } from "vitest";
import { ERROR_CODES, type ErrorCode } from "../../service/error-codes.ts";
import { ErrorBody } from "../../service/http/error-response.ts";
import { buildOpenApi } from "../../service/http/openapi.ts";
import { decodeInput } from "../../service/http/request-input.ts";
import type { AnyRoute } from "../../service/http/route.ts";
import { ID_PATTERN, ID_PREFIXES } from "../../service/ids.ts";
import { routes } from "../../service/main.ts";

interface Media {
  readonly schema: unknown;
  readonly example?: unknown;
  readonly examples?: Record<string, { readonly summary: string; readonly value: unknown }>;
}
interface Operation {
  readonly operationId: string;
  readonly parameters: ReadonlyArray<{
    readonly name: string;
    readonly in: string;
    readonly example?: unknown;
  }>;
  readonly requestBody?: { readonly content: { readonly "application/json": Media } };
  readonly responses: Record<string, { readonly content: { readonly "application/json": Media } }>;
}

const document = buildOpenApi(routes, { version: "test" }) as unknown as {
  readonly info: { readonly description: string };
  readonly paths: Record<string, Record<string, Operation>>;
};

const operationOf = <R>(route: AnyRoute<R>): Operation => {
  const operation = document.paths[route.path]?.[route.method.toLowerCase()];
  if (!operation) throw new Error(`${route.method} ${route.path} is not in the document`);
  return operation;
};

const decodes = (schema: Schema.Top, value: unknown) =>
  Schema.decodeUnknownResult(schema as Schema.Codec<unknown, unknown>)(value, {
    onExcessProperty: "error",
    errors: "all",
  });

const failureText = (result: Result.Result<unknown, unknown>) =>
  Result.isFailure(result) ? String(result.failure) : "";

const byOperation = routes.map((route) => [`${route.method} ${route.path}`, route] as const);

describe("the OpenAPI document's examples", () => {
  it.each(byOperation)("%s: a success example the response schema decodes", (_, route) => {
    const success = operationOf(route).responses[String(route.status ?? 200)]?.content["application/json"];
    expect(success?.example, "success example").toBeDefined();
    const decoded = decodes(route.response, success?.example);
    expect(Result.isSuccess(decoded), failureText(decoded)).toBe(true);
  });

  it.each(byOperation)("%s: a request example the route's request decoding accepts", (_, route) => {
    const request = operationOf(route).requestBody?.content["application/json"];
    if (route.method !== "POST" || route.body === undefined) {
      expect(request?.example).toBeUndefined();
      return;
    }
    expect(request?.example, "request example").toBeDefined();
    const decoded = decodeInput(route.body, request?.example, "body");
    expect(Result.isSuccess(decoded), failureText(decoded)).toBe(true);
  });

  it.each(byOperation)("%s: path params with examples of the right kind", (_, route) => {
    for (const parameter of operationOf(route).parameters.filter((p) => p.in === "path")) {
      const pattern = route.params?.[parameter.name]?.pattern;
      expect(pattern, `params.${parameter.name} is declared`).toBeDefined();
      expect(String(parameter.example)).toMatch(pattern ?? /^$/);
    }
  });

  it.each(byOperation)("%s: error examples in the error shape, with their catalogue's status", (_, route) => {
    const responses = operationOf(route).responses;
    const expected = [
      "400",
      "401",
      ...(route.method === "POST" ? ["409", "413", "415"] : []),
      ...(route.params || route.testOnly ? ["404"] : []),
    ];
    for (const status of expected)
      expect(Object.keys(responses[status]?.content["application/json"].examples ?? {}), status).not.toEqual(
        [],
      );
    for (const [status, response] of Object.entries(responses)) {
      for (const [name, example] of Object.entries(response.content["application/json"].examples ?? {})) {
        const decoded = decodes(ErrorBody, example.value);
        expect(Result.isSuccess(decoded), `${status} ${name}: ${failureText(decoded)}`).toBe(true);
        const code = (example.value as ErrorBody).error.code as ErrorCode;
        expect(code in ERROR_CODES, `${code} is in the catalogue`).toBe(true);
        expect([ERROR_CODES[code].status].flat().map(String), `${code}'s status`).toContain(status);
        expect(example.summary).toBe(code);
      }
    }
  });

  it("uses ids of the real shape and prefixes, and test mode", () => {
    const prefixes = new Set<string>(Object.values(ID_PREFIXES));
    const strings: string[] = [];
    const livemodes: unknown[] = [];
    const walk = (value: unknown): void => {
      if (typeof value === "string") strings.push(value);
      else if (Array.isArray(value)) value.forEach(walk);
      else if (value !== null && typeof value === "object")
        for (const [key, inner] of Object.entries(value)) {
          if (key === "livemode") livemodes.push(inner);
          walk(inner);
        }
    };
    for (const route of routes) {
      const operation = operationOf(route);
      walk(operation.requestBody?.content["application/json"].example);
      walk(operation.responses[String(route.status ?? 200)]?.content["application/json"].example);
    }
    const ids = strings.filter((s) => /^[a-z]+_[0-9A-Z]{20,}$/.test(s));
    expect(ids.length).toBeGreaterThan(20);
    for (const id of ids) {
      expect(id).toMatch(ID_PATTERN);
      expect(prefixes.has(id.split("_")[0] ?? ""), id).toBe(true);
    }
    expect(new Set(livemodes)).toEqual(new Set([false]));
  });

  it("fails a renamed field: the decoding has teeth", () => {
    const route = routes.find((r) => r.operationId === "createCharge");
    if (!route?.body) throw new Error("createCharge takes a body");
    const charge = operationOf(route).responses["200"]?.content["application/json"].example as Record<
      string,
      unknown
    >;
    const { amount_decimal, ...rest } = charge;
    expect(Result.isSuccess(decodes(route.response, { ...rest, amount_decimals: amount_decimal }))).toBe(
      false,
    );
    expect(Result.isSuccess(decodeInput(route.body, { amount: "19.99" }, "body"))).toBe(false);
  });

  it("lists every error code, its status and meaning in the introduction", () => {
    const description = document.info.description;
    for (const heading of [
      "Authentication",
      "Idempotency",
      "Errors",
      "Pagination",
      "Webhooks",
      "Error codes",
    ])
      expect(description).toContain(`## ${heading}`);
    expect(description).toContain("Authorization: Bearer sk_test_…");
    for (const [code, entry] of Object.entries(ERROR_CODES)) {
      const line = description.split("\n").find((l) => l.startsWith(`- \`${code}\` `));
      expect(line, code).toBeDefined();
      expect(line).toContain(entry.when);
      expect(line).toContain(String([entry.status].flat()[0]));
    }
  });
});
