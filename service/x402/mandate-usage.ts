/**
 * The `mandate` scheme's signed message (docs/x402.md): the customer whose wallet authorized a
 * subscription's mandate signs, for each paid request, what it pays: the subscription, the merchant's
 * payout address and token, the amount, a nonce and a deadline. The facilitator checks it against the
 * mandate's customer address (a key's, an ERC-1271 wallet's); the client scheme (client/x402-mandate.ts)
 * signs the same typed data.
 */
import type { Hex } from "viem";

export const MANDATE_SCHEME = "mandate";

export const MANDATE_USAGE_TYPES = {
  MandateUsage: [
    { name: "subscription", type: "string" },
    { name: "payTo", type: "address" },
    { name: "asset", type: "address" },
    { name: "amount", type: "uint256" },
    { name: "nonce", type: "bytes32" },
    { name: "validBefore", type: "uint256" },
  ],
} as const;

export interface MandateUsage {
  readonly subscription: string;
  readonly payTo: Hex;
  readonly asset: Hex;
  readonly amount: bigint;
  readonly nonce: Hex;
  readonly validBefore: bigint;
}

/** The typed data a customer signs for one paid request on `chainId`. */
export const mandateUsageTypedData = (chainId: number, message: MandateUsage) => ({
  domain: { name: "x402 mandate usage", version: "1", chainId },
  types: MANDATE_USAGE_TYPES,
  primaryType: "MandateUsage" as const,
  message,
});
