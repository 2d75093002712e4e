import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { Hono } from "hono";
import { describe, expect, it } from "vitest";
import {
  chooseEncoding,
  noneMatchHits,
  precompress,
  servePrecompressed,
} from "../../service/http/precompressed.ts";

describe("precompressed responses", () => {
  it("chooses the accepted encoding with the highest q, brotli first on a tie, identity when nothing else", () => {
    expect(chooseEncoding("gzip, deflate, br, zstd")).toBe("br");
    expect(chooseEncoding("gzip")).toBe("gzip");
    expect(chooseEncoding("x-gzip")).toBe("gzip");
    expect(chooseEncoding("br;q=0.5, gzip;q=0.8")).toBe("gzip");
    expect(chooseEncoding("br;q=0, *")).toBe("gzip");
    expect(chooseEncoding("*;q=0.1, identity;q=0.5")).toBe("identity");
    expect(chooseEncoding("GZIP;Q=1")).toBe("gzip");
    expect(chooseEncoding("deflate")).toBe("identity");
    expect(chooseEncoding(undefined)).toBe("identity");
    expect(chooseEncoding("")).toBe("identity");
    expect(chooseEncoding("*;q=0")).toBe("identity");
  });

  it("matches If-None-Match by weak comparison, in a list, or *", () => {
    expect(noneMatchHits('"abc-br"', '"abc-br"')).toBe(true);
    expect(noneMatchHits('W/"abc-br"', '"abc-br"')).toBe(true);
    expect(noneMatchHits('"x", "abc-br"', '"abc-br"')).toBe(true);
    expect(noneMatchHits("*", '"abc-br"')).toBe(true);
    expect(noneMatchHits('"abc"', '"abc-br"')).toBe(false);
    expect(noneMatchHits(undefined, '"abc"')).toBe(false);
  });

  it("encodes once: each representation decodes to the same bytes and has a strong ETag of its own", async () => {
    const text = JSON.stringify({ paths: Array.from({ length: 500 }, (_, i) => `/v1/things/${i}`) });
    const { representations } = await precompress(text, "application/json; charset=utf-8");
    expect(Buffer.from(representations.identity.body).toString("utf8")).toBe(text);
    expect(gunzipSync(representations.gzip.body).toString("utf8")).toBe(text);
    expect(brotliDecompressSync(representations.br.body).toString("utf8")).toBe(text);
    expect(representations.br.body.byteLength).toBeLessThan(text.length / 4);
    const tags = Object.values(representations).map((r) => r.etag);
    expect(new Set(tags).size).toBe(3);
    for (const tag of tags) expect(tag).toMatch(/^"[\w-]+"$/);
  });

  it("serves the same bytes to every request, and 304 to a request that has them", async () => {
    const precompressed = await precompress("<p>hello</p>".repeat(100), "text/html; charset=utf-8");
    const app = new Hono();
    app.get("/x", (c) => servePrecompressed(c, precompressed, { "cache-control": "no-cache" }));
    const br = await app.request("/x", { headers: { "accept-encoding": "gzip, br" } });
    expect(br.status).toBe(200);
    expect(br.headers.get("content-encoding")).toBe("br");
    expect(br.headers.get("vary")).toBe("accept-encoding");
    expect(br.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(br.headers.get("etag")).toBe(precompressed.representations.br.etag);
    expect(
      Buffer.from(await br.arrayBuffer()).equals(Buffer.from(precompressed.representations.br.body)),
    ).toBe(true);
    const plain = await app.request("/x");
    expect(plain.headers.get("content-encoding")).toBeNull();
    expect(plain.headers.get("etag")).toBe(precompressed.representations.identity.etag);
    const again = await app.request("/x", {
      headers: { "accept-encoding": "br", "if-none-match": precompressed.representations.br.etag },
    });
    expect(again.status).toBe(304);
    expect(again.headers.get("etag")).toBe(precompressed.representations.br.etag);
    expect(again.headers.get("cache-control")).toBe("no-cache");
    expect(await again.text()).toBe("");
    // The gzip tag does not validate the brotli representation.
    const other = await app.request("/x", {
      headers: { "accept-encoding": "br", "if-none-match": precompressed.representations.gzip.etag },
    });
    expect(other.status).toBe(200);
  });
});
