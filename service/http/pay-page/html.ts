/**
 * The HTML of the pay page: a shell that the bundled script fills in, and a readable 404. Asset URLs
 * are relative to `/pay/{token}`, so the page also works under a path prefix.
 */
import { documentHead, escapeHtml, type ShellAssets } from "../hosted-page/shell.ts";

const head = (title: string, assets: ShellAssets, script: boolean) =>
  documentHead(title, {
    stylesheet: `assets/pay.css?v=${assets.stylesheetVersion}`,
    script: script ? `assets/pay.js?v=${assets.scriptVersion}` : null,
  });

/** The page for a known token; the script reads the token from `data-token`. */
export const renderPayPage = (token: string, assets: ShellAssets): string => `${head("Pay", assets, true)}
<body>
<main class="page">
<div id="app" data-token="${escapeHtml(token)}" aria-busy="true">
<div class="card">
<h1>Pay</h1>
<p class="status" role="status">Loading…</p>
<noscript><p class="lead">This page needs JavaScript to show the payment's address, QR code and status.</p></noscript>
</div>
</div>
</main>
</body>
</html>
`;

export const renderNotFoundPage = (
  assets: ShellAssets,
): string => `${head("Payment not found", assets, false)}
<body>
<main class="page">
<div class="card">
<h1>Payment not found</h1>
<p class="lead">This payment link is not valid: it may be mistyped or incomplete. Ask the merchant for a new link.</p>
</div>
</main>
</body>
</html>
`;
