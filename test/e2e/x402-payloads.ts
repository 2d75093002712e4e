/** An x402 `exact` payment payload as `@x402/evm`'s client builds it: the authorization in decimal strings. */
import type { Hex } from "viem";
import type { TransferAuthorization } from "../../service/payments/transfer-authorization.ts";

export const exactPaymentPayload = <R>(requirements: R, claimed: TransferAuthorization, signature: Hex) => ({
  x402Version: 2,
  accepted: requirements,
  payload: {
    signature,
    authorization: {
      from: claimed.from,
      to: claimed.to,
      value: claimed.value.toString(),
      validAfter: claimed.validAfter.toString(),
      validBefore: claimed.validBefore.toString(),
      nonce: claimed.nonce,
    },
  },
});
