/**
 * The page's script and stylesheet, bundled from client/ with esbuild in memory, once per process
 * (the bundling is shared with the pay page: ../hosted-page/assets.ts).
 */
import { fileURLToPath } from "node:url";
import { type Assets, bundleClient } from "../hosted-page/assets.ts";

export type { Asset, Assets } from "../hosted-page/assets.ts";

const clientDir = fileURLToPath(new URL("./client/", import.meta.url));

export const bundleAssets = (): Promise<Assets> =>
  bundleClient(clientDir, { script: "authorize", stylesheet: "authorize-styles" });
