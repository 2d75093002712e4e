/**
 * A `payTo` made per request for x402's `exact` scheme (docs/x402.md), so that a route with a fixed
 * price needs no payment created in advance. Each unpaid request gets a new deposit address of the
 * merchant's, computed here as the escrow computes it, from the terms the gateway lists at
 * `GET /x402/supported` and a random escrow payment id sent along as `extra.escrowPaymentId`: an unpaid
 * request costs no call to the gateway. The paid retry keeps the address its authorization was signed
 * for. The gateway checks that the address is the merchant's, and records the payment (`pay_…`) at
 * settle; the money moves through the escrow as every payment's does.
 */
import type { FacilitatorClient, HTTPRequestContext, PaymentOption } from "@x402/core/http";
import type { AssetAmount, Network } from "@x402/core/types";
import { getAddress, type Hex, isAddress, toHex } from "viem";
import { depositAddress } from "../service/payments/deposit-address.ts";

/** The escrow's terms of the merchant's payments on a chain, but for their id and token. */
export interface DepositTerms {
  readonly escrow: Hex;
  readonly payee: Hex;
  readonly operator: Hex;
  readonly holdSeconds: number;
}

const PAYMENT_ID = /^0x[0-9a-fA-F]{64}$/;

const termsOf = (extra: unknown): DepositTerms | undefined => {
  const terms = (extra as { depositTerms?: Record<string, unknown> } | undefined)?.depositTerms;
  if (terms === undefined) return undefined;
  const { escrow, payee, operator, holdSeconds } = terms;
  return typeof escrow === "string" &&
    isAddress(escrow) &&
    typeof payee === "string" &&
    isAddress(payee) &&
    typeof operator === "string" &&
    isAddress(operator) &&
    typeof holdSeconds === "number" &&
    Number.isSafeInteger(holdSeconds) &&
    holdSeconds >= 0
    ? { escrow, payee, operator, holdSeconds }
    : undefined;
};

/** The escrow payment id a paid request's authorization was signed for, if it names one on `network`. */
const signedFor = (header: string | undefined, network: Network): Hex | undefined => {
  if (header === undefined) return undefined;
  try {
    const payload = JSON.parse(atob(header)) as {
      accepted?: { network?: unknown; extra?: { escrowPaymentId?: unknown } };
    };
    const id = payload.accepted?.extra?.escrowPaymentId;
    return payload.accepted?.network === network && typeof id === "string" && PAYMENT_ID.test(id)
      ? (id.toLowerCase() as Hex)
      : undefined;
  } catch {
    return undefined;
  }
};

const randomPaymentId = (): Hex => toHex(crypto.getRandomValues(new Uint8Array(32)));

export class X402Deposits {
  private readonly terms: ReadonlyMap<Network, DepositTerms>;

  constructor(terms: ReadonlyMap<Network, DepositTerms>) {
    this.terms = terms;
  }

  /** The terms the facilitator (the gateway's `/x402`) lists; load again after changing the payout address. */
  static async load(facilitator: FacilitatorClient): Promise<X402Deposits> {
    const supported = await facilitator.getSupported();
    const terms = new Map<Network, DepositTerms>();
    for (const kind of supported.kinds) {
      const found = kind.scheme === "exact" ? termsOf(kind.extra) : undefined;
      if (found !== undefined) terms.set(kind.network, found);
    }
    return new X402Deposits(terms);
  }

  /** A route's `accepts`: `price` (base units of `asset`) paid to a deposit address made per request. */
  exact(option: {
    readonly network: Network;
    readonly price: AssetAmount;
    readonly maxTimeoutSeconds?: number;
  }): PaymentOption {
    const terms = this.terms.get(option.network);
    if (terms === undefined)
      throw new Error(
        `The facilitator lists no deposit terms for ${option.network}: the chain is not one of yours that takes payments, or it has no relayer.`,
      );
    const token = getAddress(option.price.asset);
    // payTo and price are asked for separately with the same request's context: one id for both.
    const ids = new WeakMap<HTTPRequestContext, Hex>();
    const idOf = (context: HTTPRequestContext) => {
      const known = ids.get(context);
      if (known !== undefined) return known;
      const id = signedFor(context.paymentHeader, option.network) ?? randomPaymentId();
      ids.set(context, id);
      return id;
    };
    return {
      scheme: "exact",
      network: option.network,
      ...(option.maxTimeoutSeconds === undefined ? {} : { maxTimeoutSeconds: option.maxTimeoutSeconds }),
      payTo: (context) =>
        getAddress(
          depositAddress(terms.escrow, {
            paymentId: idOf(context),
            payee: getAddress(terms.payee),
            token,
            operator: getAddress(terms.operator),
            holdSeconds: BigInt(terms.holdSeconds),
          }),
        ),
      price: (context) => ({
        ...option.price,
        extra: { ...option.price.extra, escrowPaymentId: idOf(context) },
      }),
    };
  }
}
