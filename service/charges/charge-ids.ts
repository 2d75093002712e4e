/** The escrow's ids of a charge and the relayer's names of its transactions. */
import { encodeAbiParameters, type Hex, keccak256 } from "viem";

/** The escrow's charge id: one per mandate and period. */
export const onchainChargeId = (mandateId: Hex, period: number): Hex =>
  keccak256(encodeAbiParameters([{ type: "bytes32" }, { type: "uint32" }], [mandateId, period]));

/**
 * One charge attempt's transaction. The charge id makes each attempt's purpose new: after a charge whose
 * transaction reverted failed, a retry in the same period is a new charge and sends its own transaction.
 */
export const chargePurpose = (chainId: number, onchainId: string, chargeId: string) =>
  `charge:${chainId}:${onchainId}:${chargeId}`;
