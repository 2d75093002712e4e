/**
 * The hosted customer portal: `GET /portal/{token}` (HTML) and its bundled assets, registered like the
 * other hosted pages (../hosted-page/shell.ts). Its JSON endpoints (`/portal/{token}/session` and the
 * actions) are registered with the other public routes (routes/portal.ts). An expired link gets the
 * readable 404 as an unknown one does.
 */
import type { Env, Hono } from "hono";
import { PORTAL_TOKEN_PATTERN } from "../../portal/portal-sessions.ts";
import type { Assets } from "../hosted-page/assets.ts";
import { registerHostedPage } from "../hosted-page/shell.ts";
import { bundleAssets } from "./assets.ts";

export const ASSET_PATHS = {
  script: "/assets/portal.js",
  stylesheet: "/assets/portal.css",
} as const;

export interface PortalPageOptions {
  /** Whether a token names a portal session that has not expired; others get the HTML 404 page. */
  readonly tokenExists: (token: string) => Promise<boolean>;
  /** Produces the script and stylesheet; default: esbuild over ./client, once per process. */
  readonly assets?: () => Promise<Assets>;
}

export const registerPortalPage = <E extends Env>(app: Hono<E>, options: PortalPageOptions): void =>
  registerHostedPage(app, {
    pagePath: "/portal/:token",
    assetPaths: ASSET_PATHS,
    tokenPattern: PORTAL_TOKEN_PATTERN,
    tokenExists: options.tokenExists,
    bundle: options.assets ?? bundleAssets,
    text: {
      title: "Your payments",
      noscript: "This page needs JavaScript to show and manage your payments.",
      notFoundTitle: "Link not valid",
      notFoundLead:
        "This link is not valid or has expired (links work for an hour). Return to the merchant's site and open it again.",
    },
  });
