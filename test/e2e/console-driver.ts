/**
 * What the console's Chromium tests share: a page opened on /console with every request it makes
 * recorded (clipboard allowed), the locators of its shell, and sign-in by pasting a key.
 */
import type { Page } from "playwright-core";
import { hostedPageBrowser } from "./browser-wallet.ts";
import { stack } from "./helpers.ts";

export const consoleBrowser = () => {
  const browser = hostedPageBrowser("test-results/console");

  /** The console on a fresh page, with every request it makes recorded from the first one on. */
  const openConsole = async (): Promise<{ page: Page; requests: string[] }> => {
    const page = await browser.openPage("about:blank", null);
    const requests: string[] = [];
    page.on("request", (request) => requests.push(request.url()));
    await page.context().grantPermissions(["clipboard-read", "clipboard-write"], { origin: stack().apiUrl });
    await page.goto(`${stack().apiUrl}/console`);
    return { page, requests };
  };

  return { ...browser, openConsole };
};

export const status = (page: Page) => page.getByRole("status");
export const heading = (page: Page, name: string) =>
  page.getByRole("heading", { name, level: 1, exact: true });
export const nav = (page: Page, name: string) =>
  page.getByRole("navigation", { name: "Console" }).getByRole("link", { name, exact: true });

export const signIn = async (page: Page, key: string) => {
  await page.getByLabel("API key").fill(key);
  await page.getByLabel("API key").press("Enter");
};
