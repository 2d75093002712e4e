/**
 * The API reference at `/docs`: Scalar's API reference (`@scalar/api-reference`, MIT) rendering
 * `/v1/openapi.json` in the browser, from its standalone bundle that the service serves out of
 * node_modules. The page talks to its own origin only, from a sandbox (`API_REFERENCE_CSP`).
 *
 * Why Scalar: Redoc and Scalar are both MIT and render OpenAPI 3.1 with Markdown, a navigation tree and
 * request and response examples. Redoc 2.5 (a 1.1 MB bundle, maintenance releases only) always loads its
 * "API docs by Redocly" logo from Redocly's CDN; Redoc 3.0 (2.3 MB, weeks old) sends OpenTelemetry traces
 * to Redocly unless told not to and loads icons from a CDN. Scalar's bundle is the largest (4.35 MB,
 * 1.26 MB gzipped, 1.05 MB in brotli: served precompressed, precompressed.ts), but it is released weekly, needs neither `eval` nor workers, and
 * everything in it that reaches out (default web fonts, telemetry, the AI agent, MCP, the request
 * client and its proxy, the developer toolbar) can be switched off, which `CONFIGURATION` does.
 */
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
import type { Env, Hono } from "hono";
import { assetCache } from "./hosted-page/assets.ts";
import { escapeHtml } from "./hosted-page/shell.ts";
import { type Precompressed, precompress, servePrecompressed } from "./precompressed.ts";

/**
 * The standalone bundle and the package's version (the assets' cache-busting `?v=`), found from the
 * package's entry (its exports name neither file).
 */
const SCALAR_ENTRY = pathToFileURL(createRequire(import.meta.url).resolve("@scalar/api-reference"));
const BUNDLE_URL = new URL("browser/standalone.js", SCALAR_ENTRY);
const PACKAGE_URL = new URL("../package.json", SCALAR_ENTRY);

export const API_REFERENCE_PATH = "/docs";
export const BUNDLE_PATH = "/docs/assets/scalar-api-reference.js";
export const STORAGE_PATH = "/docs/assets/sandbox-storage.js";

/**
 * Scalar reads `localStorage` as it starts (its colour mode, its chosen client), which throws in a sandbox
 * without `allow-same-origin` (the page would stay blank). This script, run before the bundle, gives the
 * page an in-memory Storage in place of each unusable one: it lasts as long as the page, and the
 * origin's own storage stays out of reach.
 */
export const SANDBOX_STORAGE_SCRIPT = `(() => {
  const memory = () => {
    const items = new Map();
    return {
      get length() { return items.size; },
      key: (index) => [...items.keys()][index] ?? null,
      getItem: (key) => items.get(String(key)) ?? null,
      setItem: (key, value) => { items.set(String(key), String(value)); },
      removeItem: (key) => { items.delete(String(key)); },
      clear: () => { items.clear(); },
    };
  };
  for (const name of ["localStorage", "sessionStorage"]) {
    try {
      window[name];
    } catch {
      Object.defineProperty(window, name, { value: memory(), configurable: true });
    }
  }
})();
`;

/**
 * Scalar's options (its HTML API reads them from `data-configuration`). Off: everything that would
 * contact another host or run a request from the page.
 */
export const CONFIGURATION = {
  withDefaultFonts: false, // fonts.scalar.com; the system's fonts instead
  telemetry: false,
  agent: { disabled: true }, // the "Ask AI" agent (on by default on localhost)
  mcp: { disabled: true },
  hideClientButton: true, // the request client, which may go through proxy.scalar.com
  hideTestRequestButton: true,
  showDeveloperTools: "never",
  documentDownloadType: "json", // a download of the document already loaded: no request
  defaultHttpClient: { targetKey: "shell", clientKey: "curl" },
  orderRequiredPropertiesFirst: true,
} as const;

/**
 * What Scalar needs, and nothing more: its script from this origin (no `eval`, no worker, no inline
 * script: the HTML API reads the configuration from a JSON `<script>` the browser never runs); inline
 * styles, because it injects its stylesheet as a `<style>` element and sets `style` attributes at run
 * time (it has no nonce option); `data:` images (its inline icons); the document fetched from this
 * origin. No fonts (the system's), frames, workers, forms or objects.
 *
 * And `sandbox`: the page runs in an opaque origin, not the console's. A third party's 4 MB of script
 * then cannot read `GET /console/session` (another origin, which answers no CORS) and its requests carry
 * no session cookie (`SameSite=Strict`: an opaque origin is another site), so it cannot act as a
 * signed-in merchant; nor can it use this origin's storage (it gets a page-long one in memory:
 * SANDBOX_STORAGE_SCRIPT). Only the OpenAPI document, public, answers it (`Access-Control-Allow-Origin: *`).
 */
export const API_REFERENCE_CSP = [
  "sandbox allow-scripts allow-popups",
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'none'",
  "connect-src 'self'",
  "object-src 'none'",
  "worker-src 'none'",
  "frame-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

/** Scalar's version: the `?v=` of the bundle's link. */
const scalarVersion = async (): Promise<string> =>
  (JSON.parse(await readFile(PACKAGE_URL, "utf8")) as { version: string }).version;

/** Read and compressed once per process, on first use (4 MB: not at start, which most processes never need). */
const loadBundle = async (): Promise<Precompressed> =>
  precompress(await readFile(BUNDLE_URL), "text/javascript; charset=utf-8");

/** Links are relative to `/docs` (`docs/assets/…`, `v1/openapi.json`), so a path prefix works. */
export const renderApiReferencePage = (title: string, bundleVersion: string): string => {
  const configuration = escapeHtml(JSON.stringify(CONFIGURATION));
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="data:,">
</head>
<body>
<noscript><p>This reference needs JavaScript. The OpenAPI document is at <a href="v1/openapi.json">v1/openapi.json</a>.</p></noscript>
<script id="api-reference" type="application/json" data-url="v1/openapi.json" data-configuration="${configuration}"></script>
<script src="${STORAGE_PATH.slice(1)}"></script>
<script src="${BUNDLE_PATH.slice(1)}?v=${escapeHtml(bundleVersion)}"></script>
</body>
</html>
`;
};

const PAGE_HEADERS = {
  "content-security-policy": API_REFERENCE_CSP,
  "cache-control": "no-cache",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
} as const;

export const registerApiReference = <E extends Env>(app: Hono<E>, title: string): void => {
  const version = assetCache(scalarVersion);
  const page = assetCache(async () =>
    precompress(renderApiReferencePage(title, await version()), "text/html; charset=utf-8"),
  );
  const bundle = assetCache(loadBundle);
  const storage = assetCache(() => precompress(SANDBOX_STORAGE_SCRIPT, "text/javascript; charset=utf-8"));
  app.get(API_REFERENCE_PATH, async (c) => servePrecompressed(c, await page(), PAGE_HEADERS));
  app.get(STORAGE_PATH, async (c) =>
    servePrecompressed(c, await storage(), {
      "cache-control": "no-cache",
      "x-content-type-options": "nosniff",
    }),
  );
  app.get(BUNDLE_PATH, async (c) =>
    servePrecompressed(c, await bundle(), {
      // A versioned URL never changes content; the bare one is revalidated.
      "cache-control":
        c.req.query("v") === (await version()) ? "public, max-age=31536000, immutable" : "no-cache",
      "x-content-type-options": "nosniff",
    }),
  );
};
