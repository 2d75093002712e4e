/**
 * Credentials and merchants' chain configurations are cached per process (service/db/cleared-caches.ts)
 * and a change clears every process's caches at once: two service processes on one database (the
 * stack's and a second `service/main.ts`).
 * - A key and a console session of it used on both, the key revoked by the operator CLI (a third
 *   process), and the very next request on each process refused. The cache is real: a key revoked behind
 *   the service's back (triggers off, so no NOTIFY) is still accepted from the cache until the next
 *   revocation's NOTIFY clears it.
 * - A payout address changed through one process is the one the other process's very next mandate is
 *   opened with; one changed behind the service's back is not, until the next change's NOTIFY.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import {
  api,
  cli,
  expectErrorShape,
  newAddress,
  newMerchantWithKey,
  query,
  sessionCookieOf,
  silently,
  stack,
} from "./helpers.ts";
import { startSecondService } from "./second-service.ts";

let secondUrl = "";

beforeAll(async () => {
  // The stack's relayer key, so that the second process opens mandates too (replicas share it).
  secondUrl = await startSecondService({ RELAYER_PRIVATE_KEY: stack().relayerKey });
});

const keyIdOf = async (merchantId: string) =>
  (await cli("keys", "list", "--merchant", merchantId)).split("\t")[0] ?? "";

const signIn = async (key: string, baseUrl: string) => {
  const signedIn = await api("/console/session", { key: null, body: { api_key: key }, baseUrl });
  expect(signedIn.status, signedIn.text).toBe(200);
  return sessionCookieOf(signedIn.headers.get("set-cookie"));
};

/** Revokes a key in the database without firing its trigger. */
const revokeSilently = (keyId: string) =>
  silently((sql) => sql`UPDATE billing.api_keys SET revoked_at = now() WHERE id = ${keyId}`);

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

describe("merchant chain configurations across processes", () => {
  const openMandate = (key: string, baseUrl: string) =>
    api("/v1/mandates", {
      key,
      baseUrl,
      body: { cap_decimal: "5.00", period: "month", customer: "cus_cache" },
    });
  /** The payout address of a mandate opened on `baseUrl`. */
  const payeeOf = async (key: string, baseUrl: string) => {
    const opened = await openMandate(key, baseUrl);
    expect(opened.status, opened.text).toBe(200);
    return opened.json.payee_address as string;
  };
  /** The payout address `GET /v1/merchant/chains` answers on `baseUrl` (from the process's cache). */
  const listedOn = async (key: string, baseUrl: string) => {
    const listed = await api("/v1/merchant/chains", { key, baseUrl });
    expect(listed.status, listed.text).toBe(200);
    return listed.json.data[0]?.payout_address as string;
  };

  it("a mandate opened on the other process right after a payout change pays the new address", async () => {
    const { key } = await newMerchantWithKey("test");
    const urls = [stack().apiUrl, secondUrl];
    const first = newAddress();
    expect(
      (await api("/v1/merchant/chains", { key, body: { chain: 31337, payout_address: first } })).status,
    ).toBe(200);
    for (const baseUrl of urls) {
      const opened = await openMandate(key, baseUrl);
      expect(opened.status, opened.text).toBe(200);
      expect(opened.json.payee_address).toBe(first);
    }
    for (const [changeOn, openOn] of [urls, [...urls].reverse()] as const) {
      const payout = newAddress();
      const changed = await api("/v1/merchant/chains", {
        key,
        baseUrl: changeOn,
        body: { chain: 31337, payout_address: payout },
      });
      expect(changed.status, changed.text).toBe(200);
      const opened = await openMandate(key, openOn as string);
      expect(opened.status, opened.text).toBe(200);
      expect(opened.json.payee_address, openOn).toBe(payout);
      const listed = await api("/v1/merchant/chains", { key, baseUrl: openOn });
      expect(listed.json.data.map((c: { payout_address: string }) => c.payout_address)).toEqual([payout]);
    }
  });

  it("answers from the cache, which the next change's NOTIFY clears", async () => {
    const { merchantId, key } = await newMerchantWithKey("test");
    const urls = [stack().apiUrl, secondUrl];
    const first = newAddress();
    expect(
      (await api("/v1/merchant/chains", { key, body: { chain: 31337, payout_address: first } })).status,
    ).toBe(200);
    for (const baseUrl of urls) expect(await listedOn(key, baseUrl)).toBe(first);

    const behindTheBack = newAddress();
    await silently(
      (sql) => sql`UPDATE billing.merchant_chains SET payout_address = ${behindTheBack}
        WHERE merchant_id = ${merchantId} AND superseded_at IS NULL`,
    );
    // No NOTIFY: both processes still list the cached address (for at most the cache's TTL), but a
    // mandate, which fixes its payee, reads the configuration afresh and never takes a replaced address.
    for (const baseUrl of urls) {
      expect(await listedOn(key, baseUrl)).toBe(first);
      expect(await payeeOf(key, baseUrl)).toBe(behindTheBack);
    }

    // Any write to the table clears every process's caches; this one changes nothing of this merchant.
    const other = await newMerchantWithKey("test");
    expect(
      (
        await api("/v1/merchant/chains", {
          key: other.key,
          body: { chain: 31337, payout_address: newAddress() },
        })
      ).status,
    ).toBe(200);
    // The other process hears the notification one loopback packet later (longer on a loaded machine).
    for (const baseUrl of urls)
      await waitFor(async () => (await listedOn(key, baseUrl)) === behindTheBack, {
        timeoutMs: 5_000,
        intervalMs: 20,
        what: `${baseUrl} to list the address the notification told it about`,
      });
    const stored = await query<{ payout_address: string }>(
      "SELECT payout_address FROM billing.merchant_chains WHERE merchant_id = $1 AND superseded_at IS NULL",
      [merchantId],
    );
    expect(stored).toEqual([{ payout_address: behindTheBack }]);
  });
});
