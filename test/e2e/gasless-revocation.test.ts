/**
 * A customer holding USDC and no ETH revokes its mandate by a signature alone, through the hosted page's
 * API (`/authorize/{token}/revocation`: the typed data, then the signature); the relayer submits
 * `revokeWithSignature`, and `mandate.revoked` follows as for any revocation. A signature that would not
 * revoke (a stranger's, for another deadline, expired) is refused with a 400 and nothing is sent.
 */
import type { Hex } from "viem";
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { REVOKE_TYPES } from "../../service/mandates/terms.ts";
import { type PageTypedData, signPageTerms } from "../contract/harness.ts";
import { chainDriver, usd } from "./chain-driver.ts";
import { api, merchantOnTestChain, query } from "./helpers.ts";

interface RevokeTypedData {
  readonly domain: { name: string; version: string; chainId: number; verifyingContract: Hex };
  readonly primaryType: string;
  readonly message: { mandateId: Hex; deadline: string };
}

const signRevocation = (
  signer: PrivateKeyAccount,
  typed: RevokeTypedData,
  deadline = typed.message.deadline,
) =>
  signer.signTypedData({
    domain: typed.domain,
    types: REVOKE_TYPES,
    primaryType: "Revoke",
    message: { mandateId: typed.message.mandateId, deadline: BigInt(deadline) },
  });

describe("gasless revocation", () => {
  it("revokes a mandate by the customer's signature alone, refusing bad signatures before any gas is spent", async () => {
    const driver = chainDriver(31337);
    const m = await merchantOnTestChain();
    const customer = privateKeyToAccount(generatePrivateKey());
    const stranger = privateKeyToAccount(generatePrivateKey());
    await driver.mint(customer.address, usd("100"));
    const opened = await m.call("/v1/mandates", {
      cap_decimal: "10",
      period: "month",
      customer: "cus_leaving",
    });
    expect(opened.status, opened.text).toBe(200);
    const id = opened.json.id as string;
    const token = String(opened.json.authorization_url).split("/authorize/")[1] ?? "";
    const page = (path: string, body?: unknown) =>
      api(
        `/authorize/${token}${path}`,
        body === undefined ? { key: null } : { key: null, idempotencyKey: null, body },
      );

    // Not signed yet: nothing to revoke.
    expect((await page("/revocation")).json.error).toMatchObject({ code: "mandate_not_authorized" });
    const terms = await page("/terms", { customer_address: customer.address });
    const { terms: typedTerms, permit } = terms.json as {
      terms: PageTypedData;
      permit: PageTypedData | null;
    };
    const signed = await page("/signatures", await signPageTerms(customer, typedTerms, permit));
    expect(signed.status, signed.text).toBe(200);
    const [authorized] = await m.waitForEvents("mandate.authorized", 1, (o) => o.id === id);
    const onchainId = authorized?.data.object.onchain_id as Hex;
    const charge = await m.call(`/v1/mandates/${id}/charges`, { amount_decimal: "10" });
    expect(charge.status, charge.text).toBe(200);
    await m.waitForEvents("charge.succeeded", 1, (o) => o.mandate === id);

    const requested = await page("/revocation");
    expect(requested.status, requested.text).toBe(200);
    const typed = requested.json.typed_data as RevokeTypedData;
    expect(requested.json).toMatchObject({ object: "revocation_request", mandate: id });
    expect(String(requested.json.customer_address).toLowerCase()).toBe(customer.address.toLowerCase());
    expect(typed.primaryType).toBe("Revoke");
    expect(typed.domain).toMatchObject({ name: "MandateEscrow", version: "1", chainId: 31337 });
    expect(typed.domain.verifyingContract.toLowerCase()).toBe(driver.escrow.toLowerCase());
    expect(typed.message.mandateId.toLowerCase()).toBe(onchainId.toLowerCase());

    const revocationsSent = async () =>
      (
        await query(`SELECT 1 FROM billing.relayer_transactions WHERE action LIKE $1`, [
          `%${onchainId.toLowerCase()}:revoke`,
        ])
      ).length;
    const submit = (signature: Hex, deadline = typed.message.deadline) =>
      page("/revocation", { deadline, signature });
    const refusals = [
      await submit(await signRevocation(stranger, typed)),
      await submit(await signRevocation(customer, typed), String(BigInt(typed.message.deadline) + 1n)),
      await submit(await signRevocation(customer, typed, "1000"), "1000"),
      await submit(`0x${"ab".repeat(65)}`),
    ];
    expect(refusals.map((r) => [r.status, r.json.error?.code])).toEqual([
      [400, "signature_invalid"],
      [400, "signature_invalid"],
      [400, "terms_expired"],
      [400, "signature_invalid"],
    ]);
    expect(await revocationsSent()).toBe(0);

    const revoked = await submit(await signRevocation(customer, typed));
    expect(revoked.status, revoked.text).toBe(200);
    expect(revoked.json).toMatchObject({ object: "revocation", mandate: id, status: "pending" });
    const [event] = await m.waitForEvents("mandate.revoked", 1, (o) => o.id === id);
    expect(event?.data.object).toMatchObject({ status: "revoked" });
    expect(await revocationsSent()).toBe(1);

    // The customer never sent a transaction nor held gas; the mandate is over for every path.
    expect(await driver.client.getBalance({ address: customer.address })).toBe(0n);
    expect(await driver.client.getTransactionCount({ address: customer.address })).toBe(0);
    expect((await submit(await signRevocation(customer, typed))).json.error).toMatchObject({
      code: "mandate_revoked",
    });
    const afterwards = await m.call(`/v1/mandates/${id}/charges`, { amount_decimal: "1" });
    expect(afterwards.json.error).toMatchObject({ code: "mandate_revoked" });
    const update = await m.call(`/v1/mandates/${id}`, { cap_decimal: "20" });
    expect(update.json.error).toMatchObject({ code: "mandate_revoked" });
  });

  it("counts a signed revocation in the mandate's daily limit of relayed transactions", async () => {
    const LIMIT = 5; // AUTHORIZATIONS_PER_MANDATE_PER_DAY's default
    const m = await merchantOnTestChain();
    const customer = privateKeyToAccount(generatePrivateKey());
    const opened = await m.call("/v1/mandates", { cap_decimal: "10", period: "month", customer: "cus_busy" });
    const id = opened.json.id as string;
    const token = String(opened.json.authorization_url).split("/authorize/")[1] ?? "";
    const page = (path: string, body?: unknown) =>
      api(
        `/authorize/${token}${path}`,
        body === undefined ? { key: null } : { key: null, idempotencyKey: null, body },
      );
    // The limit used up by valid signatures: the first, then re-signatures of the next versions.
    const first = await page("/terms", { customer_address: customer.address });
    const typedTerms = first.json.terms as PageTypedData;
    for (let version = 1; version <= LIMIT; version++) {
      const now = Number((await chainDriver(31337).client.getBlock()).timestamp);
      const terms = {
        domain: typedTerms.domain,
        message: { ...typedTerms.message, nonce: String(version), deadline: String(now + 3_000) },
      };
      const sent = await page("/signatures", await signPageTerms(customer, terms, null));
      expect(sent.status, sent.text).toBe(200);
      await m.waitForEvents("mandate.authorized", version, (o) => o.id === id);
    }
    const requested = await page("/revocation");
    const typed = requested.json.typed_data as RevokeTypedData;
    const refused = await page("/revocation", {
      deadline: typed.message.deadline,
      signature: await signRevocation(customer, typed),
    });
    expect(refused.status, refused.text).toBe(429);
    expect(refused.json.error).toMatchObject({ code: "authorization_limit_reached" });
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await m.call(`/v1/mandates/${id}`)).json).toMatchObject({ status: "active" });
  });
});
