/** The portal page's calls to the service (same origin, no API key: the link is the credential). */
import { call } from "../../hosted-page/client/http.ts";
import type { Revocation, RevocationRequest, Session, SignedRevocation } from "./types.ts";

export { ApiError } from "../../hosted-page/client/http.ts";

export interface Api {
  session(): Promise<Session>;
  /** Cancels the subscription at the end of its period; answers the portal as it then stands. */
  cancel(subscription: string): Promise<Session>;
  /** The revocation of the mandate for the customer's wallet to sign (EIP-712). */
  revocation(mandate: string): Promise<RevocationRequest>;
  /** The signed revocation, for the service to relay (no gas from the customer). */
  revoke(mandate: string, signed: SignedRevocation): Promise<Revocation>;
}

export const httpApi = (token: string): Api => {
  const base = `/portal/${encodeURIComponent(token)}`;
  return {
    session: () => call<Session>(`${base}/session`),
    revocation: (mandate) =>
      call<RevocationRequest>(`${base}/mandates/${encodeURIComponent(mandate)}/revocation`),
    revoke: (mandate, signed) =>
      call<Revocation>(`${base}/mandates/${encodeURIComponent(mandate)}/revocation`, signed),
    cancel: (subscription) =>
      call<Session>(`${base}/subscriptions/${encodeURIComponent(subscription)}/cancel`, {}),
  };
};
