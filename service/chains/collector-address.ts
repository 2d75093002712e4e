/**
 * The collector the escrow deploys in its constructor (its first CREATE, nonce 1). Deposit addresses
 * are clones of it (payments/deposit-address.ts), so this is what they are computed from. Apart from
 * contract-code.ts so that a client computing deposit addresses carries no compiled code. Pure.
 */
import { getContractAddress, type Hex } from "viem";

export const collectorAddress = (escrow: Hex): Hex =>
  getContractAddress({ from: escrow, nonce: 1n }).toLowerCase() as Hex;
