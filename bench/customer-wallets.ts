/**
 * The billing bench's customers' wallets: fresh keys and their addresses, and EIP-712 signatures of
 * the hosted page's terms and permit as a wallet returns them.
 *
 * They use libsecp256k1 (tiny-secp256k1, its WebAssembly build), as many wallets do: 0.11 ms a
 * signature on these machines against 0.29 ms for viem's pure-JS curve, and 0.10 ms a key's public
 * point against 0.27 ms. The customers sign on the same two cores as the service under test. viem still
 * hashes the typed data, and the service's simulation checks every signature as before.
 */
import { randomBytes } from "node:crypto";
import * as secp256k1 from "tiny-secp256k1";
import { bytesToHex, type Hex, hashTypedData, hexToBytes } from "viem";
import { type PrivateKeyAccount, publicKeyToAddress } from "viem/accounts";
import { type PageTypedData, signPageTerms } from "../test/contract/harness.ts";

export interface Customer {
  readonly key: Hex;
  readonly address: Hex;
}

export const newCustomer = (): Customer => {
  for (;;) {
    const key = randomBytes(32);
    const point = secp256k1.isPrivate(key) ? secp256k1.pointFromScalar(key, false) : null;
    if (point) return { key: bytesToHex(key), address: publicKeyToAddress(bytesToHex(point)) };
  }
};

/** A signature of `hash` as a wallet returns it: r, s (the low one), then v as 27 or 28. */
export const signHash = (hash: Hex, key: Hex): Hex => {
  const { signature, recoveryId } = secp256k1.signRecoverable(hexToBytes(hash), hexToBytes(key));
  return `${bytesToHex(signature)}${(27 + recoveryId).toString(16)}`;
};

/** The page's `/signatures` body for `customer`, as a wallet signs: with the address it already knows. */
export const signTerms = (customer: Customer, terms: PageTypedData, permit: PageTypedData | null) =>
  signPageTerms(
    {
      address: customer.address,
      signTypedData: (async (typed) =>
        signHash(hashTypedData(typed), customer.key)) as PrivateKeyAccount["signTypedData"],
    },
    terms,
    permit,
  );
