/** The pay page's calls to the service (same origin, no API key). */
import { call } from "../../hosted-page/client/http.ts";
import type { AuthorizationRequest, Session } from "./types.ts";

export { ApiError } from "../../hosted-page/client/http.ts";

export interface Api {
  session(): Promise<Session>;
  authorize(request: AuthorizationRequest): Promise<Session>;
}

export const httpApi = (token: string): Api => {
  const base = `/pay/${encodeURIComponent(token)}`;
  return {
    session: () => call<Session>(`${base}/session`),
    authorize: (request) => call<Session>(`${base}/authorizations`, request),
  };
};
