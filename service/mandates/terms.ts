/**
 * What a customer signs, built from a mandate record: the escrow's EIP-712 Terms and, for tokens with
 * EIP-2612, the Permit that sets the escrow's allowance. Pure: callers supply chain time and nonces.
 * The on-chain mandate id is the customer's address (upper 160 bits) and a random 96-bit salt stored on
 * the record (`onchainMandateId`), so the escrow needs no customer field and no one can register, or
 * front-run, an id in another customer's space.
 */
import { type Hex, keccak256, toHex } from "viem";

export const TERMS_TYPES = {
  Terms: [
    { name: "mandateId", type: "bytes32" },
    { name: "payee", type: "address" },
    { name: "token", type: "address" },
    { name: "cap", type: "uint256" },
    { name: "anchor", type: "uint64" },
    { name: "approvalPeriods", type: "uint32" },
    { name: "operator", type: "address" },
    { name: "holdSeconds", type: "uint64" },
    { name: "nonce", type: "uint64" },
    { name: "deadline", type: "uint64" },
  ],
} as const;

/** A customer's revocation, signed in the escrow's domain and submitted by anyone (`revokeWithSignature`). */
export const REVOKE_TYPES = {
  Revoke: [
    { name: "mandateId", type: "bytes32" },
    { name: "deadline", type: "uint64" },
  ],
} as const;

export const PERMIT_TYPES = {
  Permit: [
    { name: "owner", type: "address" },
    { name: "spender", type: "address" },
    { name: "value", type: "uint256" },
    { name: "nonce", type: "uint256" },
    { name: "deadline", type: "uint256" },
  ],
} as const;

/** The fields of the EIP-712 domains we sign in (no salt). */
export const EIP712_DOMAIN = [
  { name: "name", type: "string" },
  { name: "version", type: "string" },
  { name: "chainId", type: "uint256" },
  { name: "verifyingContract", type: "address" },
] as const;

/** A signature is valid this long after the terms are handed out. */
export const SIGNATURE_WINDOW_SECONDS = 3600;

/** A mandate id's upper 160 bits are the customer's address; the lower 96 are the mandate's salt. */
export const onchainMandateId = (customer: Hex, salt: bigint): Hex =>
  toHex((BigInt(customer) << 96n) | salt, { size: 32 });

export const saltOf = (onchainId: Hex): bigint => BigInt(onchainId) & (2n ** 96n - 1n);

export interface TermsInput {
  readonly chainId: number;
  readonly escrow: Hex;
  readonly customer: Hex;
  readonly salt: bigint;
  readonly payee: Hex;
  readonly token: Hex;
  readonly cap: bigint;
  readonly anchor: number;
  readonly approvalPeriods: number;
  readonly operator: Hex;
  readonly holdSeconds: number;
  readonly nonce: bigint;
  readonly deadline: number;
}

export type TermsMessage = {
  readonly mandateId: Hex;
  readonly payee: Hex;
  readonly token: Hex;
  readonly cap: bigint;
  readonly anchor: bigint;
  readonly approvalPeriods: number;
  readonly operator: Hex;
  readonly holdSeconds: bigint;
  readonly nonce: bigint;
  readonly deadline: bigint;
};

export const termsMessage = (input: TermsInput): TermsMessage => ({
  mandateId: onchainMandateId(input.customer, input.salt),
  payee: input.payee,
  token: input.token,
  cap: input.cap,
  anchor: BigInt(input.anchor),
  approvalPeriods: input.approvalPeriods,
  operator: input.operator,
  holdSeconds: BigInt(input.holdSeconds),
  nonce: input.nonce,
  deadline: BigInt(input.deadline),
});

export const termsDomain = (chainId: number, escrow: Hex) =>
  ({ name: "MandateEscrow", version: "1", chainId, verifyingContract: escrow }) as const;

/** A token's EIP-712 domain: EIP-2612 permits and EIP-3009 authorizations are signed in it (USDC: "USD Coin", "2"). */
export type TokenDomain = {
  readonly name: string;
  readonly version: string;
  readonly chainId: number;
  readonly verifyingContract: Hex;
};

export interface PermitMessage {
  readonly owner: Hex;
  readonly spender: Hex;
  readonly value: bigint;
  readonly nonce: bigint;
  readonly deadline: bigint;
}

/** Typed data as `eth_signTypedData_v4` takes it: JSON only, so integers as decimal strings. */
export type JsonMessage<M> = { readonly [K in keyof M]: M[K] extends bigint ? string : M[K] };

const jsonMessage = <M extends object>(message: M): JsonMessage<M> =>
  Object.fromEntries(
    Object.entries(message).map(([key, value]) => [
      key,
      typeof value === "bigint" ? value.toString() : value,
    ]),
  ) as JsonMessage<M>;

export const termsTypedDataJson = (chainId: number, escrow: Hex, message: TermsMessage) => ({
  domain: termsDomain(chainId, escrow),
  types: { EIP712Domain: EIP712_DOMAIN, ...TERMS_TYPES },
  primaryType: "Terms" as const,
  message: jsonMessage(message),
});

export const permitTypedDataJson = (domain: TokenDomain, message: PermitMessage) => ({
  domain,
  types: { EIP712Domain: EIP712_DOMAIN, ...PERMIT_TYPES },
  primaryType: "Permit" as const,
  message: jsonMessage(message),
});

/** A customer's revocation of a mandate, valid until `deadline` (chain time, unix seconds). */
export const revokeTypedDataJson = (chainId: number, escrow: Hex, mandateId: Hex, deadline: number) => ({
  domain: termsDomain(chainId, escrow),
  types: { EIP712Domain: EIP712_DOMAIN, ...REVOKE_TYPES },
  primaryType: "Revoke" as const,
  message: { mandateId, deadline: String(deadline) },
});

/**
 * The test-mode customer wallet of a mandate: a key derived from the mandate id, so test helpers sign
 * as "the customer" deterministically. Test chains only; such a key guards nothing of value.
 */
export const testWalletKey = (mandateId: string): Hex =>
  keccak256(toHex(`mandate-billing test wallet ${mandateId}`));
