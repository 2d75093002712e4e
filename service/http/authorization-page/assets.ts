/**
 * The page's script and stylesheet, bundled from client/ with esbuild in memory, once per process
 * (started when the page is registered, awaited by the first request that needs it).
 */
import { createHash } from "node:crypto";
import { fileURLToPath } from "node:url";
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

const clientDir = fileURLToPath(new URL("./client/", import.meta.url));

const asset = (body: string, contentType: string): Asset => ({
  body,
  contentType,
  version: createHash("sha256").update(body).digest("base64url").slice(0, 16),
});

export const bundleAssets = async (): Promise<Assets> => {
  const result = await build({
    absWorkingDir: clientDir,
    entryPoints: { authorize: "main.ts", "authorize-styles": "styles.css" },
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
export const assetCache = (bundle: () => Promise<Assets> = bundleAssets) => {
  let pending: Promise<Assets> | null = null;
  return (): Promise<Assets> => {
    if (pending === null) {
      pending = bundle();
      pending.catch(() => {
        pending = null;
      });
    }
    return pending;
  };
};
