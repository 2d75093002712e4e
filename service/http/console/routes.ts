/**
 * The merchant console: `GET /console` (one HTML page; its areas are hash routes such as
 * `/console#/webhooks`) and its bundled assets. The page signs in through `/console/session`
 * (../console-session.ts) and then calls the public `/v1` API only, through the typed client: a Preact +
 * htm page bundled like the hosted pages, so an API change the console does not follow fails the
 * type-check.
 */
import type { Env, Hono } from "hono";
import { type Assets, assetCache } from "../hosted-page/assets.ts";
import { documentHead, PAGE_HEADERS, serveAsset } from "../hosted-page/shell.ts";
import { bundleAssets } from "./assets.ts";

export const CONSOLE_ASSET_PATHS = {
  script: "/console/assets/console.js",
  stylesheet: "/console/assets/console.css",
} as const;

export interface ConsoleOptions {
  /** Produces the script and stylesheet; default: esbuild over ./client, once per process. */
  readonly assets?: () => Promise<Assets>;
}

/** Links relative to `/console`, so the console also works under a path prefix. */
const renderPage = (assets: Assets) => `${documentHead("Merchant console", {
  stylesheet: `console/assets/console.css?v=${assets.stylesheet.version}`,
  script: `console/assets/console.js?v=${assets.script.version}`,
})}
<body>
<div id="app">
<main class="page"><p role="status">Loading…</p>
<noscript><p>The console needs JavaScript.</p></noscript></main>
</div>
</body>
</html>
`;

export const registerConsole = <E extends Env>(app: Hono<E>, options: ConsoleOptions = {}): void => {
  const assets = assetCache(options.assets ?? bundleAssets);
  // Bundle now, so the first visitor doesn't wait; a failure surfaces (and is retried) on request.
  assets().catch(() => undefined);

  app.get(CONSOLE_ASSET_PATHS.script, async (c) => serveAsset(c, (await assets()).script));
  app.get(CONSOLE_ASSET_PATHS.stylesheet, async (c) => serveAsset(c, (await assets()).stylesheet));
  app.get("/console", async (c) => c.body(renderPage(await assets()), 200, PAGE_HEADERS));
};
