/** The JSON the pay page exchanges with the service (see docs/pay-page.md). */
import type { PaySession } from "../../../payments/pay-session.ts";

export type { Address, TypedData } from "../../hosted-page/client/wallet.ts";

/** The session as the service sends it: the server's type, imported for its shape only (erased by the bundler). */
export type Session = PaySession;

/** A signed EIP-3009 TransferWithAuthorization, as `POST /pay/{token}/authorizations` takes it. */
export interface AuthorizationRequest {
  readonly from: string;
  readonly to: string;
  readonly value: string;
  readonly valid_after: string;
  readonly valid_before: string;
  readonly nonce: string;
  readonly signature: string;
}
