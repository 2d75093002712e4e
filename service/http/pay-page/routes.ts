/**
 * The hosted pay page: `GET /pay/{token}` (HTML) and its bundled assets, registered like the
 * authorization page (../hosted-page/shell.ts). The JSON endpoints it calls (`/pay/{token}/session`,
 * `/pay/{token}/authorizations`) are registered with the other public routes (routes/pay-page.ts).
 */
import type { Env, Hono } from "hono";
import { PAY_PAGE_TOKEN_PATTERN } from "../../payments/pay-session.ts";
import { registerHostedPage } from "../hosted-page/shell.ts";
import { type Assets, bundleAssets } from "./assets.ts";

export const ASSET_PATHS = {
  script: "/assets/pay.js",
  stylesheet: "/assets/pay.css",
} as const;

export interface PayPageOptions {
  /** Whether a token names a payment; unknown ones get the HTML 404 page. */
  readonly tokenExists: (token: string) => Promise<boolean>;
  /** Produces the script and stylesheet; default: esbuild over ./client, once per process. */
  readonly assets?: () => Promise<Assets>;
}

export const registerPayPage = <E extends Env>(app: Hono<E>, options: PayPageOptions): void =>
  registerHostedPage(app, {
    pagePath: "/pay/:token",
    assetPaths: ASSET_PATHS,
    tokenPattern: PAY_PAGE_TOKEN_PATTERN,
    tokenExists: options.tokenExists,
    bundle: options.assets ?? bundleAssets,
    text: {
      title: "Pay",
      noscript: "This page needs JavaScript to show the payment's address, QR code and status.",
      notFoundTitle: "Payment not found",
      notFoundLead:
        "This payment link is not valid: it may be mistyped or incomplete. Ask the merchant for a new link.",
    },
  });
