/**
 * A hosted page's script and stylesheet, bundled from its client folder with esbuild in memory, once
 * per process (started when the page is registered, awaited by the first request that needs it).
 * Shared by the authorization page and the pay page.
 */
import { createHash } from "node:crypto";
import { build } from "esbuild";

export interface Asset {
  readonly body: string;
  readonly contentType: string;
  /** Content hash: the `?v=` of the page's links and the ETag. */
  readonly version: string;
}

export interface Assets {
  readonly script: Asset;
  readonly stylesheet: Asset;
}

const asset = (body: string, contentType: string): Asset => ({
  body,
  contentType,
  version: createHash("sha256").update(body).digest("base64url").slice(0, 16),
});

/** Bundles `main.ts` and `styles.css` of `clientDir` (an absolute path) under the given entry names. */
export const bundleClient = async (
  clientDir: string,
  names: { readonly script: string; readonly stylesheet: string },
): Promise<Assets> => {
  const result = await build({
    absWorkingDir: clientDir,
    entryPoints: { [names.script]: "main.ts", [names.stylesheet]: "styles.css" },
    outdir: "out",
    bundle: true,
    write: false,
    format: "esm",
    platform: "browser",
    target: ["es2022", "chrome100", "firefox100", "safari15"],
    minify: true,
    charset: "utf8",
    legalComments: "none",
    logLevel: "silent",
  });
  const output = (extension: string) => {
    const file = result.outputFiles.find((f) => f.path.endsWith(extension));
    if (!file) throw new Error(`esbuild produced no ${extension} file`);
    return file.text;
  };
  return {
    script: asset(output(".js"), "text/javascript; charset=utf-8"),
    stylesheet: asset(output(".css"), "text/css; charset=utf-8"),
  };
};

/** One bundle per process; a failed build is retried by the next request. */
export const assetCache = <A = Assets>(bundle: () => Promise<A>) => {
  let pending: Promise<A> | null = null;
  return (): Promise<A> => {
    if (pending === null) {
      pending = bundle();
      pending.catch(() => {
        pending = null;
      });
    }
    return pending;
  };
};
