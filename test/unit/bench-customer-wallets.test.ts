/**
 * The billing bench's customers sign with libsecp256k1 instead of viem's curve: the same addresses and
 * the same signatures (both derive the nonce by RFC 6979), so the bench still signs as viem does.
 */
import fc from "fast-check";
import { bytesToHex, recoverAddress } from "viem";
import { privateKeyToAccount, sign } from "viem/accounts";
import { describe, expect, it } from "vitest";
import { newCustomer, signHash } from "../../bench/customer-wallets.ts";

describe("the billing bench's customer wallets", () => {
  it("give each key viem's address for it", () => {
    for (let i = 0; i < 20; i++) {
      const customer = newCustomer();
      expect(customer.address).toBe(privateKeyToAccount(customer.key).address);
    }
  });

  it("sign any hash exactly as viem does, recoverable to the customer", async () => {
    await fc.assert(
      fc.asyncProperty(fc.uint8Array({ minLength: 32, maxLength: 32 }), async (bytes) => {
        const customer = newCustomer();
        const hash = bytesToHex(bytes);
        const signature = signHash(hash, customer.key);
        expect(signature).toBe(await sign({ hash, privateKey: customer.key, to: "hex" }));
        expect(await recoverAddress({ hash, signature })).toBe(customer.address);
      }),
      { numRuns: 50 },
    );
  });
});
