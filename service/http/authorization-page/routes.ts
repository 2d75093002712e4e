/**
 * The hosted authorization page: `GET /authorize/{token}` (HTML) and its bundled assets. The JSON
 * endpoints it calls (`/authorize/{token}/session`, `/terms`, `/signatures`) are registered elsewhere.
 */
import type { Env, Hono } from "hono";
import { AUTHORIZATION_TOKEN_PATTERN } from "../../mandates/authorization-session.ts";
import { registerHostedPage } from "../hosted-page/shell.ts";
import { type Assets, bundleAssets } from "./assets.ts";

export const ASSET_PATHS = {
  script: "/assets/authorize.js",
  stylesheet: "/assets/authorize.css",
} as const;

export interface AuthorizationPageOptions {
  /** Whether a token names an authorization; unknown ones get the HTML 404 page. */
  readonly tokenExists: (token: string) => Promise<boolean>;
  /** Produces the script and stylesheet; default: esbuild over ./client, once per process. */
  readonly assets?: () => Promise<Assets>;
}

export const registerAuthorizationPage = <E extends Env>(
  app: Hono<E>,
  options: AuthorizationPageOptions,
): void =>
  registerHostedPage(app, {
    pagePath: "/authorize/:token",
    assetPaths: ASSET_PATHS,
    tokenPattern: AUTHORIZATION_TOKEN_PATTERN,
    tokenExists: options.tokenExists,
    bundle: options.assets ?? bundleAssets,
    text: {
      title: "Authorize payments",
      noscript: "This page needs JavaScript and a browser wallet to sign the authorization.",
      notFoundTitle: "Authorization not found",
      notFoundLead:
        "This authorization link is not valid: it may be mistyped or incomplete. Ask the merchant for a new link.",
    },
  });
