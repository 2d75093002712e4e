/**
 * The shapes the hosted page exchanges with the service when the customer signs: the request for the
 * terms, the signatures it submits, and the typed data a wallet is asked to sign.
 */
import { Schema } from "effect";
import type { Hex } from "viem";
import { SignatureHex } from "../chains/wallet-signatures.ts";
import type {
  PermitMessage,
  permitTypedDataJson,
  TermsMessage,
  TokenDomain,
  termsTypedDataJson,
} from "./terms.ts";

const Address = Schema.String.check(
  Schema.isPattern(/^0x[0-9a-fA-F]{40}$/, { message: "must be a 0x-prefixed 20-byte hex address" }),
);
const UintText = Schema.Union([
  Schema.String.check(Schema.isPattern(/^\d{1,78}$/)),
  Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)),
]);

export const TermsRequest = Schema.Struct({ customer_address: Address }).annotate({
  identifier: "AuthorizationTermsRequest",
});

export const SignedTerms = Schema.Struct({
  mandateId: Schema.String,
  payee: Schema.String,
  token: Schema.String,
  cap: UintText,
  anchor: UintText,
  approvalPeriods: UintText,
  operator: Schema.String,
  holdSeconds: UintText,
  nonce: UintText,
  deadline: UintText,
});

export const SignaturesRequest = Schema.Struct({
  customer_address: Address,
  terms: SignedTerms,
  signature: SignatureHex,
  permit_signature: Schema.optionalKey(Schema.NullOr(SignatureHex)),
}).annotate({ identifier: "AuthorizationSignaturesRequest" });
export type SignaturesRequest = typeof SignaturesRequest.Type;

/** EIP-712 typed data as `eth_signTypedData_v4` takes it (JSON: integers as decimal strings). */
export const TypedDataJson = Schema.Struct({
  domain: Schema.Record(Schema.String, Schema.Union([Schema.String, Schema.Number])),
  types: Schema.Record(
    Schema.String,
    Schema.Array(Schema.Struct({ name: Schema.String, type: Schema.String })),
  ),
  primaryType: Schema.String,
  message: Schema.Record(Schema.String, Schema.Union([Schema.String, Schema.Number])),
});

/** What a wallet is asked to sign (or send) for a mandate, as JSON for EIP-1193 wallets. */
export const AuthorizationRequestObject = Schema.Struct({
  terms: TypedDataJson,
  permit: Schema.NullOr(TypedDataJson),
  approve: Schema.NullOr(
    Schema.Struct({ to: Schema.String, data: Schema.TemplateLiteral(["0x", Schema.String]) }),
  ),
}).annotate({ identifier: "AuthorizationRequest" });

export interface AuthorizationRequest {
  readonly terms: ReturnType<typeof termsTypedDataJson>;
  readonly permit: ReturnType<typeof permitTypedDataJson> | null;
  readonly approve: { readonly to: string; readonly data: Hex } | null;
}

/** The same request with typed values, for signing in-process (the test wallet). */
export interface TypedAuthorizationRequest {
  readonly json: AuthorizationRequest;
  readonly terms: TermsMessage;
  readonly permit: { readonly domain: TokenDomain; readonly message: PermitMessage } | null;
}
