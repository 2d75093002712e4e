/**
 * Credentials are cached per process (service/auth/credential-cache.ts) and a revocation clears every
 * process's cache at once: two service processes on one database (the stack's and a second
 * `service/main.ts`), a key and a console session of it used on both, the key revoked by the operator
 * CLI (a third process), and the very next request on each process refused. Also shows the cache is
 * real: a key revoked behind the service's back (triggers off, so no NOTIFY) is still accepted from the
 * cache until the next revocation's NOTIFY clears it.
 */
import { PgClient } from "@effect/sql-pg";
import { Effect, Redacted } from "effect";
import { beforeAll, describe, expect, it } from "vitest";
import { api, cli, expectErrorShape, newMerchantWithKey, stack } from "./helpers.ts";
import { startSecondService } from "./second-service.ts";

let secondUrl = "";

beforeAll(async () => {
  secondUrl = await startSecondService();
});

const keyIdOf = async (merchantId: string) =>
  (await cli("keys", "list", "--merchant", merchantId)).split("\t")[0] ?? "";

const signIn = async (key: string, baseUrl: string) => {
  const signedIn = await api("/console/session", { key: null, body: { api_key: key }, baseUrl });
  expect(signedIn.status, signedIn.text).toBe(200);
  const cookie = /console_session=([^;]*)/.exec(signedIn.headers.get("set-cookie") ?? "")?.[1];
  return `console_session=${cookie}`;
};

/** Revokes a key in the database without firing its trigger: no NOTIFY reaches any process. */
const revokeSilently = (keyId: string) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const sql = yield* PgClient.PgClient;
      yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* sql`SET LOCAL session_replication_role = replica`;
          yield* sql`UPDATE billing.api_keys SET revoked_at = now() WHERE id = ${keyId}`;
        }),
      );
    }).pipe(Effect.provide(PgClient.layer({ url: Redacted.make(stack().databaseUrl), maxConnections: 1 }))),
  );

describe("credential cache across processes", () => {
  it("a key and its console session, used on two processes, are refused by both right after the revocation", async () => {
    const { key, merchantId } = await newMerchantWithKey("test");
    const urls = [stack().apiUrl, secondUrl];
    const cookies = [await signIn(key, urls[0] as string), await signIn(key, urls[1] as string)];
    for (const baseUrl of urls)
      for (let i = 0; i < 3; i++) {
        expect((await api("/v1/chains", { key, baseUrl })).status).toBe(200);
        for (const cookie of cookies)
          expect((await api("/v1/chains", { key: null, headers: { cookie }, baseUrl })).status).toBe(200);
      }

    await cli("keys", "revoke", await keyIdOf(merchantId));
    for (const baseUrl of urls) {
      const byKey = await api("/v1/chains", { key, baseUrl });
      expect(byKey.status, baseUrl).toBe(401);
      expect(expectErrorShape(byKey.json).code).toBe("api_key_invalid");
      for (const cookie of cookies) {
        const bySession = await api("/v1/chains", { key: null, headers: { cookie }, baseUrl });
        expect(bySession.status, baseUrl).toBe(401);
        expect(expectErrorShape(bySession.json).code).toBe("console_session_invalid");
      }
    }
  });

  it("answers a known key from the cache, which the next revocation's NOTIFY clears", async () => {
    const cached = await newMerchantWithKey("test");
    const other = await newMerchantWithKey("test");
    const urls = [stack().apiUrl, secondUrl];
    for (const baseUrl of urls) {
      const chains = await api("/v1/merchant/chains", { key: cached.key, baseUrl });
      expect(chains.status).toBe(200);
    }
    await revokeSilently(await keyIdOf(cached.merchantId));
    // No NOTIFY, no database read: both processes still know the key (for at most the cache's TTL).
    for (const baseUrl of urls)
      expect((await api("/v1/chains", { key: cached.key, baseUrl })).status).toBe(200);
    // A key never seen is read from the database: the silent revocation is visible there.
    const fresh = await newMerchantWithKey("test");
    await revokeSilently(await keyIdOf(fresh.merchantId));
    for (const baseUrl of urls)
      expect((await api("/v1/chains", { key: fresh.key, baseUrl })).status).toBe(401);

    await cli("keys", "revoke", await keyIdOf(other.merchantId));
    for (const baseUrl of urls) {
      expect((await api("/v1/chains", { key: cached.key, baseUrl })).status, baseUrl).toBe(401);
      expect((await api("/v1/chains", { key: other.key, baseUrl })).status, baseUrl).toBe(401);
    }
  });
});
