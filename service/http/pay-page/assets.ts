/** The pay page's script and stylesheet, bundled from client/ like the authorization page's. */
import { fileURLToPath } from "node:url";
import { type Assets, bundleClient } from "../hosted-page/assets.ts";

export type { Asset, Assets } from "../hosted-page/assets.ts";

const clientDir = fileURLToPath(new URL("./client/", import.meta.url));

export const bundleAssets = (): Promise<Assets> =>
  bundleClient(clientDir, { script: "pay", stylesheet: "pay-styles" });
