/**
 * `POST /v1/test/mandates/{id}/authorize` retried after a 503, as the API reference advises (the same
 * Idempotency-Key; a 5xx is not stored, so the retry runs again): it must not sign a second time. The
 * 503 is made certain, not hoped for: the test holds the fact relay's lock for the chain, so the
 * authorization is mined but not applied when the helper's wait ends. A loaded run of rpc-providers
 * found the helper signing again on the retry (nonce 2, a second mandate.authorized).
 */
import { randomUUID } from "node:crypto";
import type { Hex } from "viem";
import { describe, expect, it } from "vitest";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { chainDriver } from "./chain-driver.ts";
import { api, expectErrorShape, holdInTransaction, merchantOnTestChain } from "./helpers.ts";
import { relaySettled } from "./settle.ts";

/** Holds the fact relay's lock of a chain (its passes skip the chain meanwhile); resolves to its release. */
const holdRelay = (chainId: number) =>
  holdInTransaction((sql) => sql`SELECT pg_advisory_xact_lock(hashtext(${`billing.fact-relay:${chainId}`}))`);

describe("the test helper's authorize, retried", () => {
  it("signs once: a retry after its 503 waits for the signature on chain, and a later one answers the mandate", async () => {
    const chain = chainDriver(31337);
    const m = await merchantOnTestChain();
    const opened = await m.call("/v1/mandates", { cap_decimal: "5", period: "month", customer: "cus_retry" });
    expect(opened.status, opened.text).toBe(200);
    const id = opened.json.id as string;
    expect((await m.call(`/v1/test/mandates/${id}/fund`, { amount_decimal: "5" })).status).toBe(200);
    const authorize = (idempotencyKey: string) =>
      api(`/v1/test/mandates/${id}/authorize`, { key: m.key, body: {}, idempotencyKey });
    const nonceOnChain = async () => {
      const onchainId = (await m.call(`/v1/mandates/${id}`)).json.onchain_id as Hex;
      const terms = await chain.client.readContract({
        address: chain.escrow,
        abi: MandateEscrowAbi,
        functionName: "mandate",
        args: [onchainId],
      });
      return terms.nonce;
    };

    const key = randomUUID();
    const release = await holdRelay(31337);
    let released = false;
    try {
      const first = await authorize(key);
      expect(first.status, first.text).toBe(503);
      expect(expectErrorShape(first.json).code).toBe("chain_unavailable");
      expect(await nonceOnChain()).toBe(1n);
      // The retry finds the signature on chain, not applied: it waits for it, and the relay goes on.
      const retried = authorize(key);
      await release();
      released = true;
      const second = await retried;
      expect(second.status, second.text).toBe(200);
      expect(second.json).toMatchObject({ id, status: "active", signature_version: 1 });
    } finally {
      if (!released) await release();
    }
    // Asked again once the signature is applied (another request): the mandate as it is, nothing signed.
    const third = await authorize(randomUUID());
    expect(third.status, third.text).toBe(200);
    expect(third.json).toMatchObject({ id, status: "active", signature_version: 1 });

    expect(await nonceOnChain()).toBe(1n);
    await relaySettled(31337);
    const authorized = await m.events("mandate.authorized");
    expect(authorized.filter((e) => e.data.object.id === id)).toHaveLength(1);
  });
});
