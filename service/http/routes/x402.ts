import { Effect } from "effect";
import { X402Facilitator } from "../../x402/facilitator.ts";
import { SettleResponse, SupportedResponse, VerifyResponse, X402Request } from "../../x402/wire.ts";
import { settled, supported, validVerify, x402Request } from "../examples/x402.ts";
import { defineRoute } from "../route.ts";

const withFacilitator = Effect.service(X402Facilitator);

/**
 * An x402 facilitator for your own resource servers: point `@x402/core`'s `HTTPFacilitatorClient` at
 * `<api>/x402` with your secret key (docs/x402.md).
 */
export const x402Routes = [
  defineRoute({
    method: "GET",
    path: "/x402/supported",
    operationId: "x402Supported",
    tag: "x402",
    summary: "List supported x402 kinds",
    description:
      "x402 v2 `GET /supported`: the `exact` scheme on each of your chains of this mode that takes payments, and the `mandate` scheme (ours) on each that takes subscriptions (CAIP-2 `eip155:<chain id>`); the relayer addresses that send `exact` settlements.",
    response: SupportedResponse,
    examples: { response: supported },
    handler: ({ caller }) => Effect.flatMap(withFacilitator, (facilitator) => facilitator.supported(caller)),
  }),
  defineRoute({
    method: "POST",
    path: "/x402/verify",
    operationId: "x402Verify",
    tag: "x402",
    summary: "Verify an x402 payment",
    description:
      "x402 v2 `POST /verify`. `exact` on EVM: an EIP-3009 authorization that pays the payment whose `deposit_address` is `payTo`, exactly `amount`, checked as the pay page checks one (signature of a key, an ERC-1271 or an ERC-6492 wallet; balance; nonce; validity window in chain time, `validBefore` at least 60 s ahead; a simulation). `mandate` (ours): the customer of a metered subscription's mandate signed this usage, within the mandate's cap with the next invoice. Nothing is sent or recorded. A refusal is `isValid: false` with x402's reason and this API's code in `invalidMessage`; a chain that does not answer is a 503. No Idempotency-Key needed.",
    body: X402Request,
    response: VerifyResponse,
    idempotentByContent: true,
    examples: { request: x402Request, response: validVerify },
    handler: ({ caller, body }) =>
      Effect.flatMap(withFacilitator, (facilitator) => facilitator.verify(caller, body)),
  }),
  defineRoute({
    method: "POST",
    path: "/x402/settle",
    operationId: "x402Settle",
    tag: "x402",
    summary: "Settle an x402 payment",
    description:
      "x402 v2 `POST /settle`: verifies as `/x402/verify`, then the relayer sends the transfer (under the pay page's bounds: one transfer in flight per payer and token, a payer's cooling-off after a revert, your share of the relayer's budget) and the answer waits up to 20 s for its block. Longer: `success: false`, `errorReason: \"settlement_pending\"` with the transaction's hash; settling the same payload again (idempotent by the authorization's nonce) waits for the same transaction. `extra.payment` names the payment, which becomes `paid` from chain facts with `payment.paid`. `mandate`: the usage is recorded once per nonce (`transaction` and `extra.usage_record`: `ur_…`) and charged with the subscription's next invoice. No Idempotency-Key needed.",
    body: X402Request,
    response: SettleResponse,
    idempotentByContent: true,
    examples: { request: x402Request, response: settled },
    handler: ({ caller, body }) =>
      Effect.flatMap(withFacilitator, (facilitator) => facilitator.settle(caller, body)),
  }),
];
