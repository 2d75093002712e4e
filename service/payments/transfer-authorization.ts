/**
 * What the pay page's gasless payment is made of, pure: the EIP-3009 `TransferWithAuthorization` the
 * payer signs (as USDC defines it, in the token's own EIP-712 domain), the EIP-681 link its QR code
 * carries, what is left to send, and the checks a signed authorization must pass before the relayer
 * spends gas on it. The session (pay-session.ts) and the submission (gasless-payments.ts) use these.
 */
import type { Hex } from "viem";
import type { ErrorCode } from "../error-codes.ts";
import type { TokenDomain } from "../mandates/terms.ts";
import type { PaymentRow } from "./payment-object.ts";

export const TRANSFER_WITH_AUTHORIZATION_TYPES = {
  TransferWithAuthorization: [
    { name: "from", type: "address" },
    { name: "to", type: "address" },
    { name: "value", type: "uint256" },
    { name: "validAfter", type: "uint256" },
    { name: "validBefore", type: "uint256" },
    { name: "nonce", type: "bytes32" },
  ],
} as const;

/** The signed message, as the token checks it. */
export interface TransferAuthorization {
  readonly from: Hex;
  readonly to: Hex;
  readonly value: bigint;
  readonly validAfter: bigint;
  readonly validBefore: bigint;
  readonly nonce: Hex;
}

/** The typed data viem verifies (and the token hashes) for one authorization. */
export const transferAuthorizationTypedData = (domain: TokenDomain, message: TransferAuthorization) => ({
  domain,
  types: TRANSFER_WITH_AUTHORIZATION_TYPES,
  primaryType: "TransferWithAuthorization" as const,
  message,
});

/**
 * An authorization must stay valid this long after it reaches the service (chain time): the relayer's
 * transaction needs a few blocks, and a replacement with higher fees a few more.
 */
export const MIN_VALIDITY_SECONDS = 60;

/** What is still to be sent: the amount less what arrived, confirmed or not (never below 0). */
export const amountToSend = (row: Pick<PaymentRow, "amount" | "received" | "seen">): bigint => {
  const left = BigInt(row.amount) - BigInt(row.received) - BigInt(row.seen);
  return left > 0n ? left : 0n;
};

/** What arrived beyond the amount (confirmed or not). */
export const amountOverpaid = (row: Pick<PaymentRow, "amount" | "received" | "seen">): bigint => {
  const over = BigInt(row.received) + BigInt(row.seen) - BigInt(row.amount);
  return over > 0n ? over : 0n;
};

/** Statuses a payer can still pay into (an expired payment still takes a late payment). */
export const acceptsPayment = (status: PaymentRow["status"]) =>
  status !== "paid" && status !== "canceled" && status !== "reversed";

/**
 * EIP-681: the QR code's link, an ERC-20 `transfer` of `units` to `to` on `chainId`. Wallets that read
 * it prefill the token, the network, the recipient and the amount.
 */
export const erc681TransferUri = (input: {
  readonly token: string;
  readonly chainId: number;
  readonly to: string;
  readonly units: bigint;
}) => `ethereum:${input.token}@${input.chainId}/transfer?address=${input.to}&uint256=${input.units}`;

export interface AuthorizationProblem {
  readonly code: ErrorCode;
  readonly param: string | null;
  readonly message: string;
}

/**
 * The checks of a signed authorization against the payment that need no chain call beyond its time:
 * the recipient, the value and the validity window. The first problem, or undefined.
 */
export const authorizationProblem = (
  authorization: TransferAuthorization,
  payment: {
    readonly depositAddress: string;
    readonly toSend: bigint;
    readonly decimalsText: (units: bigint) => string;
    readonly symbol: string;
  },
  now: number,
): AuthorizationProblem | undefined => {
  if (authorization.to.toLowerCase() !== payment.depositAddress.toLowerCase())
    return {
      code: "payment_recipient_mismatch",
      param: "to",
      message: `The authorization pays ${authorization.to}, not this payment's deposit address ${payment.depositAddress}.`,
    };
  if (payment.toSend === 0n)
    return {
      code: "payment_not_payable",
      param: null,
      message:
        "Everything due has arrived at the deposit address and is being confirmed; nothing is left to pay.",
    };
  if (authorization.value < payment.toSend)
    return {
      code: "payment_amount_too_low",
      param: "value",
      message: `The authorization moves ${payment.decimalsText(authorization.value)} ${payment.symbol}; ${payment.decimalsText(payment.toSend)} ${payment.symbol} is left to pay.`,
    };
  if (authorization.validBefore < BigInt(now + MIN_VALIDITY_SECONDS))
    return {
      code: "authorization_expired",
      param: "valid_before",
      message: `The authorization is valid until ${authorization.validBefore} (Unix seconds), less than ${MIN_VALIDITY_SECONDS} seconds from now on the chain (${now}). Sign a new one.`,
    };
  if (authorization.validAfter >= BigInt(now))
    return {
      code: "authorization_not_yet_valid",
      param: "valid_after",
      message: `The authorization is valid only after ${authorization.validAfter} (Unix seconds); the chain is at ${now}. Use 0.`,
    };
  return undefined;
};
