/**
 * The pay page's gasless payment as a test drives it without a browser: the session a page reads, a
 * `TransferWithAuthorization` signed from it as the page's wallet would sign it, and the authorization
 * posted to the page.
 */
import type { Hex, TypedDataDefinition } from "viem";
import { generatePrivateKey } from "viem/accounts";
import type { PaySession } from "../../service/payments/pay-session.ts";

export const paySession = async (url: string): Promise<PaySession> =>
  (await fetch(`${url}/session`)).json() as Promise<PaySession>;

/** A key or a contract wallet (a Safe's owners) signing EIP-712 typed data. */
export interface TypedDataSigner {
  readonly address: Hex;
  readonly signTypedData: (typed: TypedDataDefinition) => Promise<Hex>;
}

/** Signs the session's authorization (what is left to pay, to the deposit address, valid an hour). */
export const signTransferAuthorization = async (
  signer: TypedDataSigner,
  current: PaySession,
  overrides: Partial<Record<"to" | "value" | "validAfter" | "validBefore" | "nonce", string>> = {},
) => {
  const gasless = current.gasless;
  if (gasless === null) throw new Error("the payment's token should take EIP-3009 authorizations");
  const message = {
    from: signer.address,
    to: gasless.to,
    value: gasless.value,
    validAfter: "0",
    validBefore: String(current.now + 3600),
    nonce: generatePrivateKey(),
    ...overrides,
  };
  const { EIP712Domain: _domain, ...types } = gasless.types;
  const signature = await signer.signTypedData({
    domain: gasless.domain,
    types,
    primaryType: "TransferWithAuthorization",
    message: {
      ...message,
      value: BigInt(message.value),
      validAfter: BigInt(message.validAfter),
      validBefore: BigInt(message.validBefore),
    },
  } as TypedDataDefinition);
  return {
    from: message.from,
    to: message.to,
    value: message.value,
    valid_after: message.validAfter,
    valid_before: message.validBefore,
    nonce: message.nonce,
    signature,
  };
};

/** Posts an authorization to the payment's page (`url`: its `payment_url`). */
export const postAuthorization = async (url: string, body: unknown) => {
  const response = await fetch(`${url}/authorizations`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, json: await response.json() };
};
