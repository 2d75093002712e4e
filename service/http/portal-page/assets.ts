/** The portal page's script and stylesheet, bundled from client/ like the other hosted pages (../hosted-page/assets.ts). */
import { fileURLToPath } from "node:url";
import { type Assets, bundleClient } from "../hosted-page/assets.ts";

const clientDir = fileURLToPath(new URL("./client/", import.meta.url));

export const bundleAssets = (): Promise<Assets> =>
  bundleClient(clientDir, { script: "portal", stylesheet: "portal-styles" });
