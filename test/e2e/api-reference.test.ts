/**
 * The API reference at /docs in headless Chromium (Debian's, driven by playwright-core) against the real
 * stack: navigation by tag, an operation with its request and response examples and its error examples,
 * the introduction's Markdown rendered (code elements, no raw backticks) with every error code, and every
 * request the page makes going to the service's own origin; and the page's sandbox: its scripts, a third
 * party's bundle, cannot read the console's session nor send its cookie.
 * Screenshots of what is on screen at each step go to test-results/docs/ (a test artifact, gitignored).
 */
import type { Locator, Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { ERROR_CODES } from "../../service/error-codes.ts";
import { IDS } from "../../service/http/examples/shared.ts";
import { routes } from "../../service/main.ts";
import { hostedPageBrowser } from "./browser-wallet.ts";
import { api, CONSOLE_SESSION_COOKIE, newMerchantWithKey, stack } from "./helpers.ts";

const SHOTS = "test-results/docs";
const { openPage, expectNoProblems } = hostedPageBrowser(SHOTS);

/** What is on screen (the page is long: a full-page screenshot would show little of interest). */
const shot = (page: Page, name: string) => page.screenshot({ path: `${SHOTS}/${name}.png` });

const slug = (tag: string) => tag.toLowerCase().replace(/\s+/g, "-");

/** Waits until the element's text contains `text` (Scalar renders as the page scrolls). */
const showsText = (locator: Locator, text: string) =>
  expect.poll(() => locator.textContent(), { timeout: 15_000 }).toContain(text);

/** /docs on a fresh page, with every request it makes recorded from the first one on. */
const openReference = async (): Promise<{ page: Page; requests: string[] }> => {
  const page = await openPage("about:blank", null);
  await page.setViewportSize({ width: 1400, height: 1000 });
  const requests: string[] = [];
  page.on("request", (request) => requests.push(request.url()));
  await page.goto(`${stack().apiUrl}/docs`);
  await page.getByRole("heading", { name: "Recurring billing and webhooks API" }).waitFor();
  return { page, requests };
};

describe("API reference at /docs (Chromium)", () => {
  it("navigates by tag, shows an operation with its examples, the error codes and rendered Markdown, all from its own origin", async () => {
    const { page, requests } = await openReference();

    // Navigation: a sidebar entry per tag; opening one lists its operations.
    const tags = [...new Set(routes.map((route) => route.tag))];
    for (const tag of tags) await showsText(page.locator(`a[href="#tag/${slug(tag)}"]`).first(), tag);
    await shot(page, "overview");
    await page.locator('a[href="#tag/charges"]').first().click();
    for (const route of routes.filter((r) => r.tag === "Charges"))
      await page.locator(`a[href="#tag/charges/${route.method}${route.path}"]`).first().waitFor();

    // One operation: its curl request, request body and response examples, then an error example.
    await page.locator('a[href="#tag/charges/POST/v1/mandates/{id}/charges"]').first().click();
    const operation = page.locator('section[id$="tag/charges/POST/v1/mandates/{id}/charges"]').first();
    await operation.waitFor();
    expect(decodeURIComponent(new URL(page.url()).hash)).toBe("#tag/charges/POST/v1/mandates/{id}/charges");
    await showsText(operation, `curl ${stack().apiUrl}/v1/mandates/${IDS.mandate}/charges`);
    await showsText(operation, '"amount_decimal": "19.99"');
    await showsText(operation, `"id": "${IDS.charge}"`);
    await showsText(operation, '"status": "pending"');
    await operation.getByRole("tab", { name: "400" }).click();
    await showsText(operation, '"code": "parameter_missing"');
    await showsText(operation, "Missing required param: amount_decimal.");
    await shot(page, "operation-error");

    // The introduction: Markdown rendered, every error code with its status and meaning.
    await page.locator('a[href="#description/error-codes"]').first().click();
    const introduction = page.getByRole("region", { name: "Introduction" });
    await introduction.getByRole("heading", { name: "Error codes" }).waitFor();
    await showsText(introduction, "Authorization: Bearer sk_test_…");
    await introduction
      .locator("code", { hasText: /^Idempotency-Key$/ })
      .first()
      .waitFor();
    const listed = await introduction.locator("li > code:first-child").allInnerTexts();
    expect(listed).toEqual(expect.arrayContaining(Object.keys(ERROR_CODES)));
    expect(await introduction.locator("li", { hasText: /^mandate_cap_exceeded · 400: / }).textContent()).toBe(
      `mandate_cap_exceeded · 400: ${ERROR_CODES.mandate_cap_exceeded.when}`,
    );
    // biome-ignore lint/performance/useDomNodeTextContent: the text as rendered, without scripts' source
    expect(await page.evaluate(() => document.body.innerText)).not.toContain("`");
    await shot(page, "error-codes");

    // Nothing that would reach another host is offered: no AI agent, no request client.
    expect(await page.getByText(/Ask AI|Test Request|Open API Client/).count()).toBe(0);

    // Only the service's own origin: the page, Scalar's bundle, the OpenAPI document.
    const origin = new URL(stack().apiUrl).origin;
    expect(requests.filter((url) => !url.startsWith(`${origin}/`))).toEqual([]);
    expect(requests).toEqual(
      expect.arrayContaining([
        `${origin}/docs`,
        expect.stringMatching(/\/docs\/assets\/scalar-api-reference\.js\?v=/),
        `${origin}/v1/openapi.json`,
      ]),
    );
    expectNoProblems();
    await page.close();
  });

  it("runs in a sandbox: a script in /docs can neither read the console's session nor send its cookie", async () => {
    const { key } = await newMerchantWithKey("test");
    const origin = new URL(stack().apiUrl).origin;
    const page = await openPage("about:blank", null);
    // The cookie header each request was sent with, as Chromium's network stack sent it.
    const sent: Array<Promise<{ url: string; cookie: string | undefined }>> = [];
    page.on("request", (request) =>
      sent.push(request.allHeaders().then((headers) => ({ url: request.url(), cookie: headers.cookie }))),
    );
    const cookiesTo = async (path: string) =>
      (await Promise.all(sent)).filter((r) => new URL(r.url).pathname === path).map((r) => r.cookie);

    // Signed in to the console in this browser: a page of the service's own origin reads the session and
    // keeps something in the origin's storage.
    await page.goto(`${origin}/console`);
    await page.evaluate(() => localStorage.setItem("probe", "the console's"));
    const signedIn = await page.evaluate(async (apiKey) => {
      const response = await fetch("/console/session", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ api_key: apiKey }),
      });
      return response.status;
    }, key);
    expect(signedIn).toBe(200);
    const session = await page.evaluate(async () => (await fetch("/console/session")).json());
    expect(session).toMatchObject({ object: "console_session", csrf_token: expect.any(String) });
    // (the method of observation works: this request carried the cookie)
    expect((await cookiesTo("/console/session")).at(-1)).toContain(`${CONSOLE_SESSION_COOKIE}=`);

    // The same browser on /docs: an opaque origin, not the origin's storage, and neither the session nor
    // its cookie.
    sent.length = 0;
    await page.goto(`${origin}/docs`);
    await page.getByRole("heading", { name: "Recurring billing and webhooks API" }).waitFor();
    const attempts = await page.evaluate(async () => {
      const attempt = async (request: Promise<Response>) => {
        try {
          const response = await request;
          return `${response.type} ${response.status}`;
        } catch (error) {
          return (error as Error).name;
        }
      };
      const read = (get: () => unknown) => {
        try {
          return String(get());
        } catch (error) {
          return (error as Error).name;
        }
      };
      return {
        origin: window.origin,
        cookie: read(() => document.cookie),
        storage: read(() => localStorage.getItem("probe")),
        session: await attempt(fetch("/console/session", { credentials: "include" })),
        sessionNoCors: await attempt(fetch("/console/session", { credentials: "include", mode: "no-cors" })),
        create: await attempt(
          fetch("/v1/webhook_endpoints", {
            method: "POST",
            credentials: "include",
            mode: "no-cors",
            headers: { "content-type": "text/plain" },
            body: JSON.stringify({ url: "http://127.0.0.1:9/hook", enabled_events: ["*"] }),
          }),
        ),
      };
    });
    expect(attempts).toEqual({
      origin: "null",
      cookie: "SecurityError",
      storage: "null", // a storage of its own, in memory, for the page's life
      session: "TypeError", // another origin that answers no CORS: unreadable
      sessionNoCors: "opaque 0",
      create: "opaque 0",
    });
    expect(await cookiesTo("/console/session")).toEqual([undefined, undefined]);
    expect(await cookiesTo("/v1/webhook_endpoints")).toEqual([undefined]);
    const endpoints = await api("/v1/webhook_endpoints", { key });
    expect(endpoints.json.data).toEqual([]);
    // The public OpenAPI document is the one thing it reads, by CORS.
    expect((await Promise.all(sent)).map((r) => new URL(r.url).pathname)).toContain("/v1/openapi.json");
    await page.close();
  });
});
