/**
 * What the hosted pages (the authorization page, the pay page) share on the server: the strict CSP and
 * the headers of a page whose URL carries its token, the HTML head, the bundled assets served with
 * cache-busting versions, and the registration of a page, its assets and its readable 404.
 */
import type { Context, Env, Hono } from "hono";
import { type Asset, type Assets, assetCache } from "./assets.ts";

interface ShellAssets {
  /** Cache-busting versions of the bundled script and stylesheet. */
  readonly scriptVersion: string;
  readonly stylesheetVersion: string;
}

/** No inline script or style; the page talks to its own origin only (the wallet is an extension). */
export const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

export const escapeHtml = (text: string) =>
  text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");

/** `<!doctype html>` through `</head>`; links are relative to the page, so a path prefix works. */
export const documentHead = (
  title: string,
  links: { readonly stylesheet: string; readonly script: string | null },
) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="robots" content="noindex, nofollow">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="${escapeHtml(links.stylesheet)}">${
  links.script === null ? "" : `\n<script type="module" src="${escapeHtml(links.script)}"></script>`
}
</head>`;

/** The words of a hosted page's HTML shell (its script fills in the rest) and of its readable 404. */
export interface ShellText {
  readonly title: string;
  /** Shown where JavaScript is off. */
  readonly noscript: string;
  readonly notFoundTitle: string;
  readonly notFoundLead: string;
}

const card = (inner: string) => `<div class="card">
${inner}
</div>`;

const htmlDocument = (head: string, main: string) => `${head}
<body>
<main class="page">
${main}
</main>
</body>
</html>
`;

/**
 * The page for a known token (the script reads it from `data-token`), or the 404 for `token` null.
 * Asset links are relative to `/{page}/{token}` (`../assets/…`), so the page also works under a path
 * prefix.
 */
const renderShell = (
  text: ShellText,
  paths: HostedPage["assetPaths"],
  assets: ShellAssets,
  token: string | null,
): string => {
  const relative = (path: string) => `..${path}`;
  const head = documentHead(token === null ? text.notFoundTitle : text.title, {
    stylesheet: `${relative(paths.stylesheet)}?v=${assets.stylesheetVersion}`,
    script: token === null ? null : `${relative(paths.script)}?v=${assets.scriptVersion}`,
  });
  if (token === null)
    return htmlDocument(
      head,
      card(`<h1>${escapeHtml(text.notFoundTitle)}</h1>
<p class="lead">${escapeHtml(text.notFoundLead)}</p>`),
    );
  return htmlDocument(
    head,
    `<div id="app" data-token="${escapeHtml(token)}" aria-busy="true">
${card(`<h1>${escapeHtml(text.title)}</h1>
<p class="status" role="status">Loading…</p>
<noscript><p class="lead">${escapeHtml(text.noscript)}</p></noscript>`)}
</div>`,
  );
};

export const PAGE_HEADERS = {
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

export const serveAsset = <E extends Env>(c: Context<E>, asset: Asset) => {
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

export interface HostedPage {
  /** The page's path with its token, Hono style: `/authorize/:token`. */
  readonly pagePath: string;
  readonly assetPaths: { readonly script: string; readonly stylesheet: string };
  readonly tokenPattern: RegExp;
  readonly tokenExists: (token: string) => Promise<boolean>;
  readonly bundle: () => Promise<Assets>;
  readonly text: ShellText;
}

/** Registers the page (HTML, or the readable 404 for a malformed or unknown token) and its assets. */
export const registerHostedPage = <E extends Env>(app: Hono<E>, page: HostedPage): void => {
  const assets = assetCache(page.bundle);
  // Bundle now, so the first visitor doesn't wait; a failure surfaces (and is retried) on request.
  assets().catch(() => undefined);

  app.get(page.assetPaths.script, async (c) => serveAsset(c, (await assets()).script));
  app.get(page.assetPaths.stylesheet, async (c) => serveAsset(c, (await assets()).stylesheet));
  app.get(page.pagePath, async (c) => {
    const token = c.req.param("token") ?? "";
    const bundled = shellAssets(await assets());
    if (!page.tokenPattern.test(token) || !(await page.tokenExists(token)))
      return c.body(renderShell(page.text, page.assetPaths, bundled, null), 404, PAGE_HEADERS);
    return c.body(renderShell(page.text, page.assetPaths, bundled, token), 200, PAGE_HEADERS);
  });
};
