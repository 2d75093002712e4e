/**
 * Console sign-in: an API key exchanged for an HttpOnly, SameSite=Strict session cookie that then
 * authenticates `/v1` like the key; POSTs need the session's CSRF token and our own Origin; signing out,
 * expiry of the key (revocation) and a wrong key all end in a clear error; a live session sees no test
 * objects.
 */
import { describe, expect, it } from "vitest";
import { api, cli, expectErrorShape, newAddress, newMerchantWithKey, stack } from "./helpers.ts";

const signIn = (apiKey: unknown) => api("/console/session", { key: null, body: { api_key: apiKey } });

const cookieOf = (setCookie: string | null) => {
  const value = /console_session=([^;]*)/.exec(setCookie ?? "")?.[1];
  if (!value) throw new Error(`no session cookie in ${setCookie}`);
  return `console_session=${value}`;
};

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
    expect(setCookie).not.toMatch(/Secure/); // plain http on loopback; https adds it
    expect(setCookie).not.toContain(key);
    expect(signedIn.json).toMatchObject({ object: "console_session", livemode: false, merchant: merchantId });
    const csrf = signedIn.json.csrf_token as string;
    expect(csrf).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const cookie = cookieOf(setCookie);

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
      "console_session=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
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

  it("ends the session on sign-out (with the CSRF token) and when its key is revoked", async () => {
    const { key, merchantId } = await newMerchantWithKey("test");
    const first = await signIn(key);
    const cookie = cookieOf(first.headers.get("set-cookie"));
    const second = await signIn(key);
    const secondCookie = cookieOf(second.headers.get("set-cookie"));

    const forgedEnd = await withSession("/console/session/end", cookie, { body: {} });
    expect(forgedEnd.status).toBe(403);
    expect((await withSession("/v1/chains", cookie)).status).toBe(200);

    const ended = await withSession("/console/session/end", cookie, {
      body: {},
      headers: { "x-csrf-token": first.json.csrf_token },
    });
    expect(ended.status, ended.text).toBe(200);
    expect(ended.headers.get("set-cookie")).toMatch(/console_session=;.*Max-Age=0/);
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
    const listed = await withSession("/v1/mandates", cookieOf(session.headers.get("set-cookie")));
    expect(listed.status).toBe(200);
    expect(listed.json.data).toEqual([]);
    const read = await withSession(
      `/v1/mandates/${mandate.json.id}`,
      cookieOf(session.headers.get("set-cookie")),
    );
    expect(read.status).toBe(404);
  });
});
