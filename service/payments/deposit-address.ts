/**
 * A payment's deposit address, computed the way the escrow computes it (no call to the chain): an
 * ERC-1167 clone of the escrow's collector made with CREATE2, salted with the hash of the deposit terms
 * (payment id, payee, token, operator, hold). Known before anything is deployed, with no key anywhere,
 * and able to pay only where the escrow sends it (the payee, or the escrow's hold), so the payer can be
 * any wallet or an exchange. The collector is the escrow's first deployment, created by its constructor
 * at the escrow's nonce 1 (chains/collector-address.ts). Pure.
 */
import { concat, encodeAbiParameters, getContractAddress, type Hex, keccak256 } from "viem";
import { collectorAddress } from "../chains/collector-address.ts";

export { collectorAddress };

/** The escrow's `Deposit` struct: what a deposit address is bound to. */
export interface DepositTerms {
  readonly paymentId: Hex;
  readonly payee: Hex;
  readonly token: Hex;
  readonly operator: Hex;
  readonly holdSeconds: bigint;
}

const DEPOSIT_TUPLE = [
  {
    type: "tuple",
    components: [
      { name: "paymentId", type: "bytes32" },
      { name: "payee", type: "address" },
      { name: "token", type: "address" },
      { name: "operator", type: "address" },
      { name: "holdSeconds", type: "uint64" },
    ],
  },
] as const;

/** `keccak256(abi.encode(deposit))`: the CREATE2 salt and the key of the payment's hold. */
export const depositKey = (terms: DepositTerms): Hex =>
  keccak256(encodeAbiParameters(DEPOSIT_TUPLE, [terms]));

/** ERC-1167 minimal proxy creation code for `implementation` (as OpenZeppelin's Clones deploys it). */
const cloneCreationCode = (implementation: Hex): Hex =>
  concat(["0x3d602d80600a3d3981f3363d3d373d3d3d363d73", implementation, "0x5af43d82803e903d91602b57fd5bf3"]);

export const depositAddress = (escrow: Hex, terms: DepositTerms): Hex =>
  getContractAddress({
    opcode: "CREATE2",
    from: escrow,
    salt: depositKey(terms),
    bytecode: cloneCreationCode(collectorAddress(escrow)),
  }).toLowerCase() as Hex;
