/**
 * The x402 v2 facilitator's wire format (x402-specification-v2.md §5, §7): what `@x402/core`'s
 * `HTTPFacilitatorClient` posts to /verify and /settle and reads back, and the /supported answer.
 * The protocol's own field names (camelCase), not the API's: a facilitator is called by x402's clients
 * unchanged. Its objects may carry more than these fields (later protocol versions, extensions): they
 * are kept, not refused.
 */
import { Schema } from "effect";

/** Fields a later x402 version or an extension may add, kept as they come. */
const Rest = Schema.Record(Schema.String, Schema.Unknown);
const open = <S extends Schema.Struct<Schema.Struct.Fields>>(struct: S) =>
  Schema.StructWithRest(struct, [Rest]);

export const PaymentRequirements = open(
  Schema.Struct({
    scheme: Schema.String.annotate({ description: 'The payment scheme: `"exact"`' }),
    network: Schema.String.annotate({ description: "CAIP-2 network, `eip155:<chain id>`" }),
    amount: Schema.String.annotate({ description: "Base units of the asset, in decimal digits" }),
    asset: Schema.String.annotate({ description: "The token's address" }),
    payTo: Schema.String.annotate({
      description:
        "The deposit address of one of the merchant's payments, or of one made per request (`extra.escrowPaymentId`)",
    }),
    maxTimeoutSeconds: Schema.Number,
    extra: Schema.optionalKey(
      Rest.annotate({
        description:
          "For `exact` on EVM: the token's EIP-712 domain `{ name, version }`, and `escrowPaymentId` (32 bytes, hex) when payTo is made per request",
      }),
    ),
  }),
).annotate({ identifier: "X402PaymentRequirements" });
export type PaymentRequirements = typeof PaymentRequirements.Type;

export const PaymentPayload = open(
  Schema.Struct({
    x402Version: Schema.Number,
    accepted: PaymentRequirements,
    payload: Rest.annotate({
      description:
        "For `exact` on EVM: `{ signature, authorization: { from, to, value, validAfter, validBefore, nonce } }` (EIP-3009)",
    }),
    resource: Schema.optionalKey(Schema.Unknown),
    extensions: Schema.optionalKey(Rest),
  }),
).annotate({ identifier: "X402PaymentPayload" });
export type PaymentPayload = typeof PaymentPayload.Type;

export const X402Request = open(
  Schema.Struct({
    x402Version: Schema.Number.annotate({ description: "2" }),
    paymentPayload: PaymentPayload,
    paymentRequirements: PaymentRequirements,
  }),
).annotate({ identifier: "X402Request" });
export type X402Request = typeof X402Request.Type;

const pattern = (regex: RegExp) => Schema.String.check(Schema.isPattern(regex));

/** The `exact` scheme's EVM payload: an EIP-3009 TransferWithAuthorization and its signature. */
export const ExactEvmPayload = Schema.Struct({
  signature: pattern(/^0x(?:[0-9a-fA-F]{2}){65,4096}$/),
  authorization: Schema.Struct({
    from: pattern(/^0x[0-9a-fA-F]{40}$/),
    to: pattern(/^0x[0-9a-fA-F]{40}$/),
    value: pattern(/^(0|[1-9]\d{0,77})$/),
    validAfter: pattern(/^(0|[1-9]\d{0,77})$/),
    validBefore: pattern(/^(0|[1-9]\d{0,77})$/),
    nonce: pattern(/^0x[0-9a-fA-F]{64}$/),
  }),
});
export type ExactEvmPayload = typeof ExactEvmPayload.Type;

/** The `mandate` scheme's payload: a subscription's customer signs each payment (x402/mandate-usage.ts). */
export const MandatePayload = Schema.Struct({
  subscription: pattern(/^sub_[0-9A-Z]{26}$/),
  nonce: pattern(/^0x[0-9a-fA-F]{64}$/),
  validBefore: pattern(/^(0|[1-9]\d{0,19})$/),
  signature: pattern(/^0x(?:[0-9a-fA-F]{2}){65,4096}$/),
});
export type MandatePayload = typeof MandatePayload.Type;

export const VerifyResponse = Schema.Struct({
  isValid: Schema.Boolean,
  invalidReason: Schema.optionalKey(
    Schema.String.annotate({ description: "One of the x402 specification's reasons (§9)" }),
  ),
  invalidMessage: Schema.optionalKey(
    Schema.String.annotate({ description: "This API's error code and message for the refusal" }),
  ),
  payer: Schema.optionalKey(Schema.String),
}).annotate({ identifier: "X402VerifyResponse" });
export type VerifyResponse = typeof VerifyResponse.Type;

export const SettleResponse = Schema.Struct({
  success: Schema.Boolean,
  errorReason: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "One of the x402 specification's reasons (§9), or `settlement_pending`: the transaction is sent (`transaction`) and not mined yet; settling again waits for it",
    }),
  ),
  errorMessage: Schema.optionalKey(Schema.String),
  payer: Schema.optionalKey(Schema.String),
  transaction: Schema.String.annotate({
    description:
      "`exact`: the transaction's hash, empty when nothing was sent; `mandate`: the usage record's id (charged on chain with the next invoice)",
  }),
  network: Schema.String,
  amount: Schema.optionalKey(Schema.String),
  extra: Schema.optionalKey(
    Schema.Struct({
      payment: Schema.optionalKey(
        Schema.String.annotate({ description: "`exact`: the payment (`pay_…`) the transfer pays" }),
      ),
      usage_record: Schema.optionalKey(
        Schema.String.annotate({ description: "`mandate`: the usage record (`ur_…`) of the payment" }),
      ),
      subscription: Schema.optionalKey(Schema.String.annotate({ description: "`mandate`: `sub_…`" })),
      period: Schema.optionalKey(
        Schema.Int.annotate({ description: "`mandate`: the mandate period; charged with the next invoice" }),
      ),
    }),
  ),
}).annotate({ identifier: "X402SettleResponse" });
export type SettleResponse = typeof SettleResponse.Type;

export const SupportedResponse = Schema.Struct({
  kinds: Schema.Array(
    Schema.Struct({
      x402Version: Schema.Number,
      scheme: Schema.String,
      network: Schema.String,
      extra: Schema.optionalKey(
        Schema.Struct({
          depositTerms: Schema.Struct({
            escrow: Schema.String,
            payee: Schema.String.annotate({ description: "Your payout address on the chain" }),
            operator: Schema.String,
            holdSeconds: Schema.Number,
          }),
        }).annotate({
          description:
            "`exact`: the escrow's terms of your payments on the chain but for their id and token, from which a payTo is made per request (client/x402-deposits.ts)",
        }),
      ),
    }),
  ),
  extensions: Schema.Array(Schema.String),
  signers: Schema.Record(Schema.String, Schema.Array(Schema.String)).annotate({
    description: "The addresses that send settlements, by CAIP-2 family (`eip155:*`)",
  }),
}).annotate({ identifier: "X402SupportedResponse" });
export type SupportedResponse = typeof SupportedResponse.Type;
