/**
 * Every path the service registers fits Hono's RegExpRouter (one regular expression for all routes).
 * A static segment beside a parameter at the same place (`/pay/assets/…` beside `/pay/:token/…`) makes
 * Hono fall back to its trie router, about five times slower a match, on every request. And the request
 * log leaves out the paths that load balancers, supervisors and scrapers poll.
 */
import { Effect, Exit, Logger } from "effect";
import { CurrentLogAnnotations } from "effect/References";
import { describe, expect, it } from "vitest";
import { makeApp } from "../../service/http/app.ts";
import { registerAuthorizationPage } from "../../service/http/authorization-page/routes.ts";
import { registerConsole } from "../../service/http/console/routes.ts";
import { registerPayPage } from "../../service/http/pay-page/routes.ts";
import { registerPortalPage } from "../../service/http/portal-page/routes.ts";
import { authorizationRoutes } from "../../service/http/routes/authorization.ts";
import { payPageRoutes } from "../../service/http/routes/pay-page.ts";
import { portalPageRoutes } from "../../service/http/routes/portal.ts";
import { routes } from "../../service/main.ts";

describe("the service's router", () => {
  it("is Hono's RegExpRouter for every registered path", async () => {
    const app = makeApp({
      routes,
      publicRoutes: [...authorizationRoutes, ...payPageRoutes, ...portalPageRoutes],
      extend: (hono) => {
        registerAuthorizationPage(hono, { tokenExists: async () => false });
        registerPayPage(hono, { tokenExists: async () => false });
        registerPortalPage(hono, { tokenExists: async () => false });
        registerConsole(hono);
      },
      run: async () => Exit.die("no runtime in this test"),
      readiness: async () => ({ ready: true, checks: {} }),
      openapi: {},
    });
    const answer = await app.request("/v1/openapi.json");
    expect(answer.status).toBe(200);
    expect(answer.headers.get("request-id")).toMatch(/^req_/);
    expect(app.router.name).toBe("SmartRouter + RegExpRouter");
  });
});

describe("the request log", () => {
  it("has a line for each request but those of the polled paths (readiness, indexer liveness, metrics)", async () => {
    const logged: string[] = [];
    const capture = Logger.layer([
      Logger.make(({ message, fiber }) => {
        const path = fiber.getRef(CurrentLogAnnotations).path;
        if (String(message) === "request") logged.push(String(path));
      }),
    ]);
    const app = makeApp({
      routes,
      publicRoutes: [],
      // Only the request log runs effects here: no service is asked for.
      run: (effect) =>
        Effect.runPromiseExit(effect.pipe(Effect.provide(capture)) as Effect.Effect<never, unknown>),
      readiness: async () => ({ ready: true, checks: {} }),
      indexerLiveness: async () => ({ stalled: [] }),
      openapi: {},
    });
    for (const path of ["/ready", "/indexer/live", "/v1/openapi.json", "/ready", "/nowhere"])
      await (await app.request(path)).arrayBuffer();
    expect(logged).toEqual(["/v1/openapi.json", "/nowhere"]);
  });
});
