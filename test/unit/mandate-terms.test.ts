import fc from "fast-check";
import { getAddress, type Hex, recoverTypedDataAddress } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { classifyChargeRevert } from "../../service/charges/charge-failures.ts";
import { onchainChargeId } from "../../service/charges/charge-ids.ts";
import {
  onchainMandateId,
  saltOf,
  TERMS_TYPES,
  termsDomain,
  termsMessage,
  termsTypedDataJson,
  testWalletKey,
} from "../../service/mandates/terms.ts";

const address = fc
  .uint8Array({ minLength: 20, maxLength: 20 })
  .map((b) => getAddress(`0x${Buffer.from(b).toString("hex")}`));
const salt = fc.bigInt({ min: 0n, max: 2n ** 96n - 1n });

describe("mandate terms", () => {
  it("put the customer in the upper 160 bits of the mandate id and the salt in the lower 96", () => {
    fc.assert(
      fc.property(address, salt, (customer, s) => {
        const id = onchainMandateId(customer, s);
        expect(id).toMatch(/^0x[0-9a-f]{64}$/);
        expect(getAddress(`0x${id.slice(2, 42)}`)).toBe(customer);
        expect(saltOf(id)).toBe(s);
      }),
    );
  });

  it("are signed as the escrow's EIP-712 Terms, and the JSON form carries the same values", async () => {
    const customer = privateKeyToAccount(generatePrivateKey());
    const escrow = "0x00000000000000000000000000000000000000e5" as Hex;
    const message = termsMessage({
      chainId: 31337,
      escrow,
      customer: customer.address,
      salt: 7n,
      payee: "0x00000000000000000000000000000000000000b0",
      token: "0x00000000000000000000000000000000000000a1",
      cap: 25_000_000n,
      anchor: 1_700_000_000,
      approvalPeriods: 12,
      operator: "0x00000000000000000000000000000000000000c0",
      holdSeconds: 3600,
      nonce: 1n,
      deadline: 1_700_003_600,
    });
    const signature = await customer.signTypedData({
      domain: termsDomain(31337, escrow),
      types: TERMS_TYPES,
      primaryType: "Terms",
      message,
    });
    const recovered = await recoverTypedDataAddress({
      domain: termsDomain(31337, escrow),
      types: TERMS_TYPES,
      primaryType: "Terms",
      message,
      signature,
    });
    expect(recovered).toBe(customer.address);
    const json = termsTypedDataJson(31337, escrow, message);
    expect(JSON.parse(JSON.stringify(json)).message).toEqual({
      ...json.message,
      cap: "25000000",
      anchor: "1700000000",
      nonce: "1",
    });
  });

  it("give each mandate its own deterministic test wallet, and each period its own charge id", () => {
    expect(testWalletKey("mdt_A")).toBe(testWalletKey("mdt_A"));
    expect(testWalletKey("mdt_A")).not.toBe(testWalletKey("mdt_B"));
    const id = onchainMandateId("0x00000000000000000000000000000000000000c0", 1n);
    expect(onchainChargeId(id, 0)).not.toBe(onchainChargeId(id, 1));
  });
});

describe("charge reverts", () => {
  it("map to the failure codes the merchant branches on, or to a refusal", () => {
    expect(classifyChargeRevert("InsufficientBalance")).toMatchObject({
      kind: "fail",
      failureCode: "insufficient_funds",
    });
    expect(classifyChargeRevert("InsufficientAllowance")).toMatchObject({
      kind: "fail",
      failureCode: "insufficient_funds",
    });
    expect(classifyChargeRevert("ApprovalExhausted")).toMatchObject({
      kind: "fail",
      failureCode: "approval_exhausted",
    });
    expect(classifyChargeRevert("CapExceeded")).toMatchObject({
      kind: "refuse",
      code: "mandate_cap_exceeded",
    });
    expect(classifyChargeRevert("PeriodAlreadyCharged")).toMatchObject({
      kind: "refuse",
      code: "period_already_charged",
    });
    expect(classifyChargeRevert("Revoked")).toMatchObject({ kind: "refuse", code: "mandate_revoked" });
    expect(classifyChargeRevert(undefined)).toMatchObject({ kind: "fail", failureCode: "processing_error" });
  });
});
