/**
 * An operator's relayers on the escrow: the operator named in every mandate's and payment's terms may be
 * a cold key or a Safe, and the keys that send transactions are relayers it names on chain
 * (`setRelayer`, or `setRelayerWithSignature` with the EIP-712 message below, signed offline and
 * submitted by anyone). Rotating a relayer key changes no terms, so no customer signs again.
 */

import type { Hex } from "viem";

/** What an operator signs to name (`allowed`) or remove a relayer; `nonce` is its `relayerNonce`. */
export const SET_RELAYER_TYPES = {
  SetRelayer: [
    { name: "relayer", type: "address" },
    { name: "allowed", type: "bool" },
    { name: "nonce", type: "uint64" },
    { name: "deadline", type: "uint64" },
  ],
} as const;

export interface SetRelayerMessage {
  readonly relayer: Hex;
  readonly allowed: boolean;
  readonly nonce: bigint;
  readonly deadline: bigint;
}

/** The typed data an operator signs for `setRelayerWithSignature` on the escrow at `escrow`. */
export const setRelayerTypedData = (chainId: number, escrow: Hex, message: SetRelayerMessage) =>
  ({
    domain: { name: "MandateEscrow", version: "1", chainId, verifyingContract: escrow },
    types: SET_RELAYER_TYPES,
    primaryType: "SetRelayer",
    message,
  }) as const;
