/** The console's script and stylesheet, bundled from client/ like the hosted pages'. */
import { fileURLToPath } from "node:url";
import { type Assets, bundleClient } from "../hosted-page/assets.ts";

const clientDir = fileURLToPath(new URL("./client/", import.meta.url));

export const bundleAssets = (): Promise<Assets> =>
  bundleClient(clientDir, { script: "console", stylesheet: "console-styles" });
