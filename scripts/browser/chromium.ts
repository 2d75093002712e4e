/**
 * Debian's Chromium for the browser tests: playwright-core drives it, and never downloads a browser.
 * `ensureChromium()` returns its path, installing the `chromium` package with apt-get when running as
 * root on a clean machine (CI); anyone else gets told how to install it.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

export const CHROMIUM_PATH = "/usr/bin/chromium";

/**
 * Flags that work on these machines (as root, headless, with no network but the registries): without the
 * background-networking ones, Chromium keeps trying to reach Google's hosts. Playwright adds `--headless`
 * and a fresh, temporary user data dir itself.
 */
export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
] as const;

const aptGet = (...args: string[]) =>
  spawnSync("apt-get", args, {
    stdio: ["ignore", "inherit", "inherit"],
    env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
  }).status === 0;

export const ensureChromium = async (): Promise<string> => {
  if (existsSync(CHROMIUM_PATH)) return CHROMIUM_PATH;
  if (process.getuid?.() !== 0)
    throw new Error(
      `Chromium is not installed (${CHROMIUM_PATH} is missing) and installing it needs root. ` +
        "Install Debian's package: sudo apt-get install -y chromium",
    );
  console.log("Installing Debian's chromium for the browser tests…");
  // Of the recommended packages only the fonts matter here (screenshots); the rest is desktop plumbing.
  // A fresh machine may have no package lists yet: update once, then try again.
  const install = () => aptGet("install", "-y", "--no-install-recommends", "chromium", "fonts-liberation");
  if (!install()) {
    if (!aptGet("update") || !install())
      throw new Error("apt-get could not install chromium (see its output above).");
  }
  if (!existsSync(CHROMIUM_PATH))
    throw new Error(`apt-get installed chromium, but ${CHROMIUM_PATH} is still missing.`);
  return CHROMIUM_PATH;
};
