/** The portal page's calls to the service (same origin, no API key: the link is the credential). */
import { call } from "../../hosted-page/client/http.ts";
import type { Session } from "./types.ts";

export { ApiError } from "../../hosted-page/client/http.ts";

export interface Api {
  session(): Promise<Session>;
  /** Cancels the subscription at the end of its period; answers the portal as it then stands. */
  cancel(subscription: string): Promise<Session>;
}

export const httpApi = (token: string): Api => {
  const base = `/portal/${encodeURIComponent(token)}`;
  return {
    session: () => call<Session>(`${base}/session`),
    cancel: (subscription) =>
      call<Session>(`${base}/subscriptions/${encodeURIComponent(subscription)}/cancel`, {}),
  };
};
