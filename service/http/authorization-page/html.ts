/**
 * The HTML of the authorization page: a shell that the bundled script fills in, and a readable 404.
 * Asset URLs are relative to `/authorize/{token}`, so the page also works under a path prefix.
 */
import { documentHead, escapeHtml, type ShellAssets } from "../hosted-page/shell.ts";

const head = (title: string, assets: ShellAssets, script: boolean) =>
  documentHead(title, {
    stylesheet: `assets/authorize.css?v=${assets.stylesheetVersion}`,
    script: script ? `assets/authorize.js?v=${assets.scriptVersion}` : null,
  });

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
