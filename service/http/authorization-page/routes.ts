/**
 * The hosted authorization page: `GET /authorize/{token}` (HTML) and its bundled assets. The JSON
 * endpoints it calls (`/authorize/{token}/session`, `/terms`, `/signatures`) are registered elsewhere.
 */
import type { Context, Env, Hono } from "hono";
import { AUTHORIZATION_TOKEN_PATTERN } from "../../mandates/authorization-session.ts";
import { type Asset, type Assets, assetCache } from "./assets.ts";
import {
  CONTENT_SECURITY_POLICY,
  renderAuthorizationPage,
  renderNotFoundPage,
  type ShellAssets,
} from "./html.ts";

export const ASSET_PATHS = {
  script: "/authorize/assets/authorize.js",
  stylesheet: "/authorize/assets/authorize.css",
} as const;

export interface AuthorizationPageOptions {
  /**
   * Whether a token names an authorization; unknown ones get the HTML 404 page. Default: asks this
   * app's own `GET /authorize/{token}/session`, which answers 404 `authorization_not_found` for them.
   */
  readonly tokenExists?: (token: string) => Promise<boolean>;
  /** Produces the script and stylesheet; default: esbuild over ./client, once per process. */
  readonly assets?: () => Promise<Assets>;
}

const PAGE_HEADERS = {
  "content-type": "text/html; charset=utf-8",
  "content-security-policy": CONTENT_SECURITY_POLICY,
  // The URL carries the token: never cache the page, never send it as a referrer, never frame it.
  "cache-control": "no-store",
  "referrer-policy": "no-referrer",
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
} as const;

const shellAssets = (assets: Assets): ShellAssets => ({
  scriptVersion: assets.script.version,
  stylesheetVersion: assets.stylesheet.version,
});

/** Asks the app itself whether the session endpoint knows the token; only its explicit 404 counts as unknown. */
const viaSessionEndpoint =
  <E extends Env>(app: Hono<E>) =>
  async (token: string): Promise<boolean> => {
    const response = await app.request(`/authorize/${token}/session`, {
      headers: { accept: "application/json" },
    });
    if (response.status !== 404) return true;
    const body = (await response.json().catch(() => null)) as { error?: { code?: unknown } } | null;
    return body?.error?.code !== "authorization_not_found";
  };

const serveAsset = <E extends Env>(c: Context<E>, asset: Asset) => {
  const etag = `"${asset.version}"`;
  // A versioned URL never changes content; the bare one is revalidated.
  const cacheControl =
    c.req.query("v") === asset.version ? "public, max-age=31536000, immutable" : "no-cache";
  const headers = {
    etag,
    "cache-control": cacheControl,
    "x-content-type-options": "nosniff",
  };
  if (c.req.header("if-none-match") === etag) return c.body(null, 304, headers);
  return c.body(asset.body, 200, { ...headers, "content-type": asset.contentType });
};

export const registerAuthorizationPage = <E extends Env>(
  app: Hono<E>,
  options: AuthorizationPageOptions = {},
): void => {
  const assets = assetCache(options.assets);
  // Bundle now, so the first customer doesn't wait; a failure surfaces (and is retried) on request.
  assets().catch(() => undefined);
  const tokenExists = options.tokenExists ?? viaSessionEndpoint(app);

  app.get(ASSET_PATHS.script, async (c) => serveAsset(c, (await assets()).script));
  app.get(ASSET_PATHS.stylesheet, async (c) => serveAsset(c, (await assets()).stylesheet));
  app.get("/authorize/:token", async (c) => {
    const token = c.req.param("token");
    const bundled = shellAssets(await assets());
    if (!AUTHORIZATION_TOKEN_PATTERN.test(token) || !(await tokenExists(token)))
      return c.body(renderNotFoundPage(bundled), 404, PAGE_HEADERS);
    return c.body(renderAuthorizationPage(token, bundled), 200, PAGE_HEADERS);
  });
};
