/**
 * The HTML of the authorization page: a shell that the bundled script fills in, and a readable 404.
 * Asset URLs are relative to `/authorize/{token}`, so the page also works under a path prefix.
 */

export interface ShellAssets {
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

const head = (title: string, assets: ShellAssets, script: boolean) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="robots" content="noindex, nofollow">
<title>${escapeHtml(title)}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="assets/authorize.css?v=${escapeHtml(assets.stylesheetVersion)}">${
  script
    ? `\n<script type="module" src="assets/authorize.js?v=${escapeHtml(assets.scriptVersion)}"></script>`
    : ""
}
</head>`;

/** The page for a known token; the script reads the token from `data-token`. */
export const renderAuthorizationPage = (token: string, assets: ShellAssets): string => `${head(
  "Authorize payments",
  assets,
  true,
)}
<body>
<main class="page">
<div id="app" data-token="${escapeHtml(token)}" aria-busy="true">
<div class="card">
<h1>Authorize payments</h1>
<p class="status" role="status">Loading…</p>
<noscript><p class="lead">This page needs JavaScript and a browser wallet to sign the authorization.</p></noscript>
</div>
</div>
</main>
</body>
</html>
`;

export const renderNotFoundPage = (
  assets: ShellAssets,
): string => `${head("Authorization not found", assets, false)}
<body>
<main class="page">
<div class="card">
<h1>Authorization not found</h1>
<p class="lead">This authorization link is not valid: it may be mistyped or incomplete. Ask the merchant for a new link.</p>
</div>
</main>
</body>
</html>
`;
