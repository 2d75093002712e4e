import { describe, expect, it } from "vitest";
import { routes } from "../../service/main.ts";
import { stack } from "./helpers.ts";

describe("OpenAPI document and reference page", () => {
  it("serves an OpenAPI 3.1 document covering every route, with the request schemas that validate", async () => {
    const response = await fetch(`${stack().apiUrl}/v1/openapi.json`);
    expect(response.status).toBe(200);
    const doc = (await response.json()) as {
      openapi: string;
      paths: Record<
        string,
        Record<string, { operationId: string; requestBody?: unknown; responses: Record<string, unknown> }>
      >;
      components: { schemas: Record<string, { additionalProperties?: boolean; required?: string[] }> };
    };
    expect(doc.openapi).toBe("3.1.0");
    for (const route of routes) {
      const operation = doc.paths[route.path]?.[route.method.toLowerCase()];
      expect(operation?.operationId, `${route.method} ${route.path}`).toBe(route.operationId);
      expect(Object.keys(operation?.responses ?? {})).toEqual(expect.arrayContaining(["400", "401"]));
    }
    const request = doc.components.schemas.ConfigureMerchantChainRequest;
    expect(request).toMatchObject({ additionalProperties: false, required: ["chain", "payout_address"] });
    expect(doc.components.schemas.Error).toBeDefined();
  });

  it("renders a readable reference at /docs", async () => {
    const response = await fetch(`${stack().apiUrl}/docs`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/html");
    const html = await response.text();
    for (const route of routes) expect(html).toContain(route.path);
    expect(html).toContain("payout_address");
  });
});
