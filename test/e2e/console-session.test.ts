/**
 * Console sign-in: an API key exchanged for an HttpOnly, SameSite=Strict session cookie that then
 * authenticates `/v1` like the key; POSTs need the session's CSRF token and our own Origin; signing out,
 * expiry of the key (revocation) and a wrong key all end in a clear error; a live session sees no test
 * objects. Sign-out without a live session and its CSRF token changes nothing (no session ended, no
 * credential cache cleared), and the console's routes, which need no key, are rate-limited per address.
 */
import { createHash, randomBytes } from "node:crypto";
import { request as httpRequest } from "node:http";
import { Agent, fetch } from "undici";
import { describe, expect, it } from "vitest";
import {
  api,
  CONSOLE_SESSION_COOKIE,
  cli,
  expectErrorShape,
  newAddress,
  newMerchantWithKey,
  query,
  sessionCookieOf,
  silently,
  stack,
  withinOneMinute,
} from "./helpers.ts";

const signIn = (apiKey: unknown) => api("/console/session", { key: null, body: { api_key: apiKey } });

const withSession = (path: string, cookie: string, options: Parameters<typeof api>[1] = {}) =>
  api(path, { ...options, key: null, headers: { cookie, ...options.headers } });

describe("console sessions", () => {
  it("exchanges a key for an HttpOnly, SameSite=Strict cookie that authenticates /v1 like the key", async () => {
    const { key, merchantId } = await newMerchantWithKey("test");
    const signedIn = await signIn(key);
    expect(signedIn.status, signedIn.text).toBe(200);
    const setCookie = signedIn.headers.get("set-cookie") ?? "";
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Strict/);
    expect(setCookie).toMatch(/Path=\//);
    expect(setCookie).toMatch(/Max-Age=43200/);
    expect(setCookie).toMatch(/^__Host-console_session=/);
    expect(setCookie).toMatch(/; Secure/); // loopback is a secure context, even over plain http
    expect(setCookie).not.toMatch(/Domain=/);
    expect(setCookie).not.toContain(key);
    expect(signedIn.json).toMatchObject({ object: "console_session", livemode: false, merchant: merchantId });
    const csrf = signedIn.json.csrf_token as string;
    expect(csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const cookie = sessionCookieOf(setCookie);

    const again = await withSession("/console/session", cookie);
    expect(again.status).toBe(200);
    expect(again.json.csrf_token).toBe(csrf);
    expect(again.headers.get("set-cookie")).toBeNull();

    const chains = await withSession("/v1/merchant/chains", cookie);
    expect(chains.status, chains.text).toBe(200);
    expect(chains.json.data).toEqual([]);

    const body = { chain: 31337, payout_address: newAddress() };
    const noToken = await withSession("/v1/merchant/chains", cookie, { body });
    expect(noToken.status).toBe(403);
    expect(expectErrorShape(noToken.json).code).toBe("console_csrf_invalid");
    const crossSite = await withSession("/v1/merchant/chains", cookie, {
      body,
      headers: { "x-csrf-token": csrf, origin: "http://127.0.0.2:9" },
    });
    expect(crossSite.status).toBe(403);
    expect(expectErrorShape(crossSite.json).code).toBe("console_csrf_invalid");
    expect((await withSession("/v1/merchant/chains", cookie)).json.data).toEqual([]);

    const configured = await withSession("/v1/merchant/chains", cookie, {
      body,
      headers: { "x-csrf-token": csrf, origin: stack().apiUrl },
    });
    expect(configured.status, configured.text).toBe(200);
    const viaKey = await api("/v1/merchant/chains", { key });
    expect(viaKey.json.data.map((c: { chain: number }) => c.chain)).toEqual([31337]);

    // A key in the Authorization header wins over a cookie (the cookie's CSRF rule does not apply to it).
    const other = await newMerchantWithKey("test");
    const asOther = await api("/v1/merchant/chains", { key: other.key, headers: { cookie } });
    expect(asOther.json.data).toEqual([]);
  });

  it("refuses a wrong, malformed or missing key with a clear message and sets no cookie", async () => {
    const wrong = await signIn(`sk_test_${"x".repeat(43)}`);
    expect(wrong.status).toBe(401);
    expect(expectErrorShape(wrong.json).code).toBe("api_key_invalid");
    expect(wrong.headers.get("set-cookie")).toBeNull();
    const malformed = await signIn("hello");
    expect(malformed.status).toBe(401);
    expect(expectErrorShape(malformed.json).code).toBe("api_key_malformed");
    const missing = await api("/console/session", { key: null, body: {} });
    expect(missing.status).toBe(400);
    expect(expectErrorShape(missing.json).code).toBe("parameter_missing");
    const forged = await withSession(
      "/v1/chains",
      `${CONSOLE_SESSION_COOKIE}=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA`,
    );
    expect(forged.status).toBe(401);
    expect(expectErrorShape(forged.json).code).toBe("console_session_invalid");
    const none = await api("/console/session", { key: null });
    expect(none.status).toBe(401);
    for (const [body, status] of [
      [{ api_key: 42 }, 400],
      [{ api_key: "sk_test_\u0000" }, 400],
      [{ api_key: "x", extra: 1 }, 400],
    ] as const) {
      const refused = await api("/console/session", { key: null, body });
      expect(refused.status, JSON.stringify(body)).toBe(status);
      expectErrorShape(refused.json);
    }
    const notJson = await api("/console/session", {
      key: null,
      rawBody: "{",
      headers: { "content-type": "application/json" },
    });
    expect(notJson.status).toBe(400);
    expect(expectErrorShape(notJson.json).code).toBe("invalid_json");
  });

  it("reads only the cookie name of the request's origin: `__Host-` where a browser takes a Secure cookie, the plain name on plain http elsewhere", async () => {
    const { key } = await newMerchantWithKey("test");
    const prefixed = sessionCookieOf((await signIn(key)).headers.get("set-cookie"));
    const token = prefixed.slice(`${CONSOLE_SESSION_COOKIE}=`.length);
    // A sibling subdomain can plant `console_session` but never `__Host-console_session`: the planted name
    // opens nothing where the prefixed one is used.
    expect((await withSession("/console/session", prefixed)).status).toBe(200);
    const planted = await withSession("/console/session", `console_session=${token}`);
    expect(planted.status).toBe(401);
    expect(expectErrorShape(planted.json).code).toBe("console_session_invalid");

    // The same service reached as http://console.test (not loopback, not https): a browser would refuse a
    // Secure cookie there, so the unprefixed name without Secure, and only that name is read.
    const { port } = new URL(stack().apiUrl);
    const asHost = (path: string, headers: Record<string, string>, body?: string) =>
      new Promise<{ status: number; setCookie: string }>((resolve, reject) => {
        const request = httpRequest(
          {
            host: "127.0.0.1",
            port,
            path,
            method: body === undefined ? "GET" : "POST",
            headers: { ...headers, host: `console.test:${port}` },
          },
          (response) => {
            response.resume();
            response.on("end", () =>
              resolve({
                status: response.statusCode ?? 0,
                setCookie: String(response.headers["set-cookie"] ?? ""),
              }),
            );
          },
        );
        request.on("error", reject);
        request.end(body);
      });
    const plain = await asHost(
      "/console/session",
      { "content-type": "application/json" },
      JSON.stringify({ api_key: key }),
    );
    expect(plain.status).toBe(200);
    expect(plain.setCookie).toMatch(/^console_session=[A-Za-z0-9_-]{43}; /);
    expect(plain.setCookie).not.toMatch(/Secure/);
    const plainToken = /^console_session=([^;]*)/.exec(plain.setCookie)?.[1] ?? "";
    expect((await asHost("/console/session", { cookie: `console_session=${plainToken}` })).status).toBe(200);
    expect(
      (await asHost("/console/session", { cookie: `${CONSOLE_SESSION_COOKIE}=${plainToken}` })).status,
    ).toBe(401);
  });

  it("ends the session on sign-out (with the CSRF token) and when its key is revoked", async () => {
    const { key, merchantId } = await newMerchantWithKey("test");
    const first = await signIn(key);
    const cookie = sessionCookieOf(first.headers.get("set-cookie"));
    const second = await signIn(key);
    const secondCookie = sessionCookieOf(second.headers.get("set-cookie"));

    const forgedEnd = await withSession("/console/session/end", cookie, { body: {} });
    expect(forgedEnd.status).toBe(403);
    expect((await withSession("/v1/chains", cookie)).status).toBe(200);

    const ended = await withSession("/console/session/end", cookie, {
      body: {},
      headers: { "x-csrf-token": first.json.csrf_token },
    });
    expect(ended.status, ended.text).toBe(200);
    expect(ended.headers.get("set-cookie")).toMatch(/^__Host-console_session=;.*Max-Age=0/);
    const after = await withSession("/v1/chains", cookie);
    expect(after.status).toBe(401);
    expect(expectErrorShape(after.json).code).toBe("console_session_invalid");
    expect((await withSession("/v1/chains", secondCookie)).status).toBe(200);

    const keyId = (await cli("keys", "list", "--merchant", merchantId)).split("\t")[0] ?? "";
    // The CLI is another process: the stack's service forgets the session when the revocation's NOTIFY
    // reaches it, a moment later (cleared-caches.ts), and from then on refuses it.
    await cli("keys", "revoke", keyId);
    await expect.poll(async () => (await withSession("/v1/chains", secondCookie)).status).toBe(401);
    const revoked = await withSession("/v1/chains", secondCookie);
    expect(revoked.status).toBe(401);
    expect(expectErrorShape(revoked.json).code).toBe("console_session_invalid");
  });

  it("refuses a sign-out without a live session and its CSRF token: no session ended, no cache cleared", async () => {
    // A key the process has cached, then revoked behind its back (no NOTIFY): it stays accepted until
    // something clears the process's credential caches, which a sign-out does.
    const cached = await newMerchantWithKey("test");
    expect((await api("/v1/chains", { key: cached.key })).status).toBe(200);
    const keyId = (await cli("keys", "list", "--merchant", cached.merchantId)).split("\t")[0] ?? "";
    await silently((sql) => sql`UPDATE billing.api_keys SET revoked_at = now() WHERE id = ${keyId}`);
    expect((await api("/v1/chains", { key: cached.key })).status).toBe(200);

    const { key } = await newMerchantWithKey("test");
    const signedIn = await signIn(key);
    const cookie = sessionCookieOf(signedIn.headers.get("set-cookie"));
    const csrf = signedIn.json.csrf_token as string;
    const token = cookie.slice(`${CONSOLE_SESSION_COOKIE}=`.length);
    const endedAt = async () =>
      (
        await query<{ ended_at: Date | null }>(
          "SELECT ended_at FROM billing.console_sessions WHERE token_sha256 = $1",
          [createHash("sha256").update(token, "utf8").digest()],
        )
      )[0]?.ended_at;

    const forgedToken = `${CONSOLE_SESSION_COOKIE}=${randomBytes(32).toString("base64url")}`;
    const refusals: Array<[string, Record<string, string>, number, string]> = [
      ["no cookie", {}, 401, "console_session_invalid"],
      ["a malformed cookie", { cookie: `${CONSOLE_SESSION_COOKIE}=x` }, 401, "console_session_invalid"],
      ["an unknown token", { cookie: forgedToken, "x-csrf-token": csrf }, 401, "console_session_invalid"],
      ["no CSRF token", { cookie }, 403, "console_csrf_invalid"],
      ["a wrong CSRF token", { cookie, "x-csrf-token": "A".repeat(43) }, 403, "console_csrf_invalid"],
      [
        "another origin",
        { cookie, "x-csrf-token": csrf, origin: "http://127.0.0.2:9" },
        403,
        "console_csrf_invalid",
      ],
    ];
    for (const [what, headers, status, code] of refusals) {
      const refused = await api("/console/session/end", { key: null, body: {}, headers });
      expect(refused.status, `${what}: ${refused.text}`).toBe(status);
      expect(expectErrorShape(refused.json).code, what).toBe(code);
      expect(refused.headers.get("set-cookie"), what).toBeNull();
    }
    expect(await endedAt()).toBeNull();
    expect((await withSession("/console/session", cookie)).status).toBe(200);
    // Nothing cleared the caches: the silently revoked key is still answered from them.
    expect((await api("/v1/chains", { key: cached.key })).status).toBe(200);

    const ended = await withSession("/console/session/end", cookie, {
      body: {},
      headers: { "x-csrf-token": csrf, origin: stack().apiUrl },
    });
    expect(ended.status, ended.text).toBe(200);
    expect(await endedAt()).toBeInstanceOf(Date);
    // The real sign-out cleared them, so the check above could have seen a clearing.
    expect((await api("/v1/chains", { key: cached.key })).status).toBe(401);
  });

  it("answers 429 with Retry-After to an address hammering the console's routes, and not its neighbour", async () => {
    const LIMIT = 600; // PAGE_RATE_LIMIT_PER_ADDRESS's default, which the console's routes share
    // A loopback address of this test's own, so the stack's other clients keep their budget.
    const loopback = () =>
      `127.0.${2 + Math.floor(Math.random() * 250)}.${2 + Math.floor(Math.random() * 250)}`;
    const from = (localAddress: string) => new Agent({ localAddress, connections: 32 });
    const forged = `${CONSOLE_SESSION_COOKIE}=${randomBytes(32).toString("base64url")}`;
    const requests = [
      { path: "/console/session/end", init: { method: "POST", body: "{}", headers: { cookie: forged } } },
      { path: "/console/session", init: { method: "POST", body: JSON.stringify({ api_key: "sk_test_x" }) } },
      { path: "/console/session", init: { method: "GET", headers: { cookie: forged } } },
    ];
    const hammer = (dispatcher: Agent, n: number) =>
      Promise.all(
        Array.from({ length: n }, async (_, i) => {
          const { path, init } = requests[i % requests.length] as (typeof requests)[number];
          const response = await fetch(`${stack().apiUrl}${path}`, {
            ...init,
            dispatcher,
            headers: { "content-type": "application/json", ...init.headers },
          });
          return {
            status: response.status,
            retryAfter: response.headers.get("retry-after"),
            text: await response.text(),
          };
        }),
      );
    const answers = await withinOneMinute(async () => {
      const client = from(loopback());
      try {
        return await hammer(client, LIMIT + 40);
      } finally {
        await client.close();
      }
    });
    const limited = answers.filter((a) => a.status === 429);
    expect(answers.filter((a) => a.status === 401).length).toBeLessThanOrEqual(LIMIT);
    expect(answers.filter((a) => a.status !== 401 && a.status !== 429)).toEqual([]);
    expect(limited.length).toBeGreaterThanOrEqual(40);
    expect(expectErrorShape(JSON.parse(limited[0]?.text ?? "null")).code).toBe("rate_limited");
    expect(Number(limited[0]?.retryAfter)).toBeGreaterThan(0);
    // The console's page counts too; another client address is not limited by this one.
    const neighbour = from(`127.0.1.${2 + Math.floor(Math.random() * 250)}`);
    try {
      const page = await fetch(`${stack().apiUrl}/console`, { dispatcher: neighbour });
      expect(page.status).toBe(200);
      await page.text();
    } finally {
      await neighbour.close();
    }
  });

  it("shows a live-mode session no test objects", async () => {
    const test = await newMerchantWithKey("test");
    await api("/v1/merchant/chains", { key: test.key, body: { chain: 31337, payout_address: newAddress() } });
    const mandate = await api("/v1/mandates", {
      key: test.key,
      body: { cap_decimal: "5", period: "month", customer: "cus_test" },
    });
    expect(mandate.status, mandate.text).toBe(200);
    // The same merchant's live key.
    const [, liveKey] = (await cli("keys", "create", "--merchant", test.merchantId, "--mode", "live")).split(
      "\t",
    );
    const session = await signIn(liveKey);
    expect(session.json.livemode).toBe(true);
    const listed = await withSession("/v1/mandates", sessionCookieOf(session.headers.get("set-cookie")));
    expect(listed.status).toBe(200);
    expect(listed.json.data).toEqual([]);
    const read = await withSession(
      `/v1/mandates/${mandate.json.id}`,
      sessionCookieOf(session.headers.get("set-cookie")),
    );
    expect(read.status).toBe(404);
  });
});
