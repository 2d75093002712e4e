/**
 * What the console's Chromium tests share: a page opened on /console with every request it makes
 * recorded (clipboard allowed) and every answer it has acted on counted (`readsDone`), the locators of
 * its shell, and sign-in by pasting a key.
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
    await page.context().addInitScript(recordReads);
    await page.goto(`${stack().apiUrl}/console`);
    return { page, requests };
  };

  return { ...browser, openConsole };
};

/**
 * Runs in the page before its own scripts: records the URL of each answer the page has read, once the
 * page has acted on it. The record is made in a task queued when the read resolves, and everything the
 * page does with the answer (its promise handlers, Preact's render) runs in microtasks before any task:
 * the event loop's order, not a wait.
 */
const recordReads = () => {
  const page = window as Window & { readsDone?: string[] };
  page.readsDone = [];
  const done = (url: string) => setTimeout(() => page.readsDone?.push(url), 0);
  const { json, text } = Response.prototype;
  Response.prototype.json = function (this: Response) {
    return json.call(this).then((value: unknown) => {
      done(this.url);
      return value;
    });
  };
  Response.prototype.text = function (this: Response) {
    return text.call(this).then((value) => {
      done(this.url);
      return value;
    });
  };
};

/** Which answers to count: those from `pathname`, and (with `lacks`) without that query parameter. */
export interface ReadFilter {
  readonly pathname: string;
  readonly lacks?: string;
}

/** In the page: how many answers matching `filter` it has acted on, when at least `min`; else false. */
const readsAtLeast = ([filter, min]: readonly [ReadFilter, number]) => {
  const count = ((window as Window & { readsDone?: string[] }).readsDone ?? [])
    .map((url) => new URL(url))
    .filter(
      (url) => url.pathname === filter.pathname && !(filter.lacks && url.searchParams.has(filter.lacks)),
    ).length;
  return count >= min ? count : false;
};

/** How many answers matching `filter` the page has acted on so far (`recordReads`). */
export const readsDoneCount = async (page: Page, filter: ReadFilter) =>
  Number(await page.evaluate(readsAtLeast, [filter, 0] as const));

/** Resolves once the page has acted on `count` answers matching `filter` in all (`recordReads`). */
export const readsDone = (page: Page, filter: ReadFilter, count: number) =>
  page.waitForFunction(readsAtLeast, [filter, count] as const);

export const status = (page: Page) => page.getByRole("status");
export const heading = (page: Page, name: string) =>
  page.getByRole("heading", { name, level: 1, exact: true });
export const nav = (page: Page, name: string) =>
  page.getByRole("navigation", { name: "Console" }).getByRole("link", { name, exact: true });

export const signIn = async (page: Page, key: string) => {
  await page.getByLabel("API key").fill(key);
  await page.getByLabel("API key").press("Enter");
};
