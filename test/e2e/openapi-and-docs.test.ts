import { randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { API_REFERENCE_CSP, BUNDLE_PATH } from "../../service/http/api-reference.ts";
import { IDS } from "../../service/http/examples/shared.ts";
import { routes } from "../../service/main.ts";
import { api, newMerchantWithKey, stack } from "./helpers.ts";

interface Operation {
  readonly operationId: string;
  readonly summary: string;
  readonly requestBody?: { content: { "application/json": { example?: unknown } } };
  readonly responses: Record<
    string,
    { content: { "application/json": { example?: unknown; examples?: Record<string, { value: unknown }> } } }
  >;
}
interface Document {
  readonly openapi: string;
  readonly info: { readonly description: string };
  readonly paths: Record<string, Record<string, Operation>>;
  readonly components: { schemas: Record<string, { additionalProperties?: boolean; required?: string[] }> };
}

const SCALAR_VERSION = (
  JSON.parse(readFileSync("node_modules/@scalar/api-reference/package.json", "utf8")) as { version: string }
).version;

const served = async (): Promise<Document> =>
  (await (await fetch(`${stack().apiUrl}/v1/openapi.json`)).json()) as Document;

/** The documented example `name` of `status` on `method path`. */
const documented = (doc: Document, method: string, path: string, status: string, name: string) =>
  doc.paths[path]?.[method]?.responses[status]?.content["application/json"].examples?.[name]?.value;

describe("OpenAPI document and reference page", () => {
  it("serves an OpenAPI 3.1 document covering every route, with the request schemas that validate", async () => {
    const response = await fetch(`${stack().apiUrl}/v1/openapi.json`);
    expect(response.status).toBe(200);
    const doc = (await response.json()) as Document;
    expect(doc.openapi).toBe("3.1.0");
    for (const route of routes) {
      const operation = doc.paths[route.path]?.[route.method.toLowerCase()];
      expect(operation?.operationId, `${route.method} ${route.path}`).toBe(route.operationId);
      // The reference's sidebar shows the summary: the route's short name (test/unit/operation-summaries.test.ts).
      expect(operation?.summary, `${route.method} ${route.path}`).toBe(route.summary);
      expect(Object.keys(operation?.responses ?? {})).toEqual(expect.arrayContaining(["400", "401"]));
      expect(
        operation?.responses[String(route.status ?? 200)]?.content["application/json"].example,
      ).toBeDefined();
    }
    const request = doc.components.schemas.ConfigureMerchantChainRequest;
    expect(request).toMatchObject({ additionalProperties: false, required: ["chain", "payout_address"] });
    expect(doc.components.schemas.Error).toBeDefined();
    expect(doc.info.description).toContain("## Error codes");
  });

  it("serves the reference page at /docs: Scalar from this origin, under a strict CSP", async () => {
    const response = await fetch(`${stack().apiUrl}/docs`);
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(response.headers.get("content-security-policy")).toBe(API_REFERENCE_CSP);
    expect(API_REFERENCE_CSP).toContain("default-src 'none'");
    expect(API_REFERENCE_CSP).toContain("script-src 'self';");
    expect(API_REFERENCE_CSP).toContain("connect-src 'self';");
    expect(response.headers.get("x-frame-options")).toBe("DENY");
    const html = await response.text();
    // Relative links, so a path prefix works; nothing from another origin.
    expect(html).toContain('data-url="v1/openapi.json"');
    expect(html).toContain(`<script src="${BUNDLE_PATH.slice(1)}?v=${SCALAR_VERSION}"></script>`);
    expect(html).not.toMatch(/(src|href)="(https?:)?\/\//);
    // No inline script: the only script without src is the configuration, which browsers do not run.
    for (const [tag] of html.matchAll(/<script[^>]*>/g))
      expect(tag).toMatch(/ src="|type="application\/json"/);
    expect(html).toContain("&quot;telemetry&quot;:false");
    expect(html).toContain("&quot;withDefaultFonts&quot;:false");
  });

  it("serves Scalar's bundle from node_modules: gzipped, versioned and cached, or revalidated", async () => {
    const bundle = readFileSync("node_modules/@scalar/api-reference/dist/browser/standalone.js");
    const url = `${stack().apiUrl}${BUNDLE_PATH}?v=${SCALAR_VERSION}`;
    const gzipped = await fetch(url, { headers: { "accept-encoding": "gzip" } });
    expect(gzipped.status).toBe(200);
    expect(gzipped.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
    expect(gzipped.headers.get("content-encoding")).toBe("gzip");
    expect(gzipped.headers.get("cache-control")).toBe("public, max-age=31536000, immutable");
    expect(Number(gzipped.headers.get("content-length"))).toBeLessThan(bundle.length / 2);
    expect(Buffer.from(await gzipped.arrayBuffer()).equals(bundle)).toBe(true);

    const plain = await fetch(url, { headers: { "accept-encoding": "identity" } });
    expect(plain.headers.get("content-encoding")).toBeNull();
    expect(Buffer.from(await plain.arrayBuffer()).equals(bundle)).toBe(true);

    const etag = plain.headers.get("etag") ?? "";
    const again = await fetch(`${stack().apiUrl}${BUNDLE_PATH}`, {
      headers: { "accept-encoding": "identity", "if-none-match": etag },
    });
    expect(again.status).toBe(304);
    expect(again.headers.get("cache-control")).toBe("no-cache");
  });

  it("serves the document, the page and the bundle precompressed, with strong ETags and Vary", async () => {
    const bundle = readFileSync("node_modules/@scalar/api-reference/dist/browser/standalone.js");
    for (const path of ["/v1/openapi.json", "/docs", `${BUNDLE_PATH}?v=${SCALAR_VERSION}`]) {
      const url = `${stack().apiUrl}${path}`;
      // undici's fetch decodes what it is sent: the bodies compared are the decoded bytes.
      const answers = new Map<string, { etag: string; body: Buffer }>();
      for (const [accept, encoding] of [
        ["gzip, deflate, br, zstd", "br"],
        ["gzip", "gzip"],
        ["identity", null],
      ] as const) {
        const response = await fetch(url, { headers: { "accept-encoding": accept } });
        expect(response.status, path).toBe(200);
        expect(response.headers.get("content-encoding"), `${path} ${accept}`).toBe(encoding);
        expect(response.headers.get("vary"), path).toBe("accept-encoding");
        const etag = response.headers.get("etag") ?? "";
        expect(etag, path).toMatch(/^"[\w-]+"$/);
        answers.set(accept, { etag, body: Buffer.from(await response.arrayBuffer()) });
        const again = await fetch(url, { headers: { "accept-encoding": accept, "if-none-match": etag } });
        expect(again.status, path).toBe(304);
        expect(again.headers.get("etag"), path).toBe(etag);
        expect(again.headers.get("vary"), path).toBe("accept-encoding");
        expect((await again.arrayBuffer()).byteLength).toBe(0);
      }
      const [first, ...others] = [...answers.values()];
      for (const other of others) expect(other.body.equals(first?.body ?? Buffer.alloc(0)), path).toBe(true);
      expect(new Set([...answers.values()].map((answer) => answer.etag)).size, path).toBe(answers.size);
      if (path.startsWith(BUNDLE_PATH)) expect(first?.body.equals(bundle)).toBe(true);
    }
    // Another representation's tag does not validate this one.
    const url = `${stack().apiUrl}/v1/openapi.json`;
    const gzipTag = (await fetch(url, { headers: { "accept-encoding": "gzip" } })).headers.get("etag") ?? "";
    const brotli = await fetch(url, { headers: { "accept-encoding": "br", "if-none-match": gzipTag } });
    expect(brotli.status).toBe(200);
    expect(brotli.headers.get("content-encoding")).toBe("br");
  });

  it("documents refusals exactly as the service answers them", async () => {
    const doc = await served();
    const expectDocumented = (
      answer: { status: number; json: unknown },
      method: string,
      path: string,
      name: string,
    ) => {
      expect(answer.json).toEqual(documented(doc, method, path, String(answer.status), name));
    };

    const wrongKey = await api("/v1/chains", { key: `sk_test_${"x".repeat(30)}` });
    expectDocumented(wrongKey, "get", "/v1/chains", "api_key_invalid");

    const noIdempotencyKey = await api("/v1/coupons", {
      body: { percent_off: 10, duration_in_months: 1 },
      idempotencyKey: null,
    });
    expectDocumented(noIdempotencyKey, "post", "/v1/coupons", "idempotency_key_missing");

    const noAmount = await api(`/v1/mandates/${IDS.mandate}/charges`, { body: {} });
    expectDocumented(noAmount, "post", "/v1/mandates/{id}/charges", "parameter_missing");

    const unknownMandate = await api(`/v1/mandates/${IDS.mandate}`);
    expectDocumented(unknownMandate, "get", "/v1/mandates/{id}", "resource_missing");

    const key = randomUUID();
    const first = await api("/v1/coupons", {
      body: { percent_off: 10, duration_in_months: 1 },
      idempotencyKey: key,
    });
    expect(first.status, first.text).toBe(200);
    const reused = await api("/v1/coupons", {
      body: { percent_off: 11, duration_in_months: 1 },
      idempotencyKey: key,
    });
    expectDocumented(reused, "post", "/v1/coupons", "idempotency_key_reused");

    const tooLarge = await api("/v1/coupons", { rawBody: JSON.stringify({ name: "x".repeat(70_000) }) });
    expectDocumented(tooLarge, "post", "/v1/coupons", "body_too_large");

    const notJson = await api("/v1/coupons", {
      rawBody: "percent_off=10",
      headers: { "content-type": "text/plain" },
    });
    expectDocumented(notJson, "post", "/v1/coupons", "unsupported_media_type");

    const live = await newMerchantWithKey("live");
    const testHelperLive = await api("/v1/test/clock/advance", { key: live.key, body: { seconds: 60 } });
    expectDocumented(testHelperLive, "post", "/v1/test/clock/advance", "route_not_found");
  });
});
