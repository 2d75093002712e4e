/** The page's calls to the service (same origin, no API key). */
import { call } from "../../hosted-page/client/http.ts";
import type { Session, SignaturesRequest, TermsResponse } from "./types.ts";

export { ApiError } from "../../hosted-page/client/http.ts";

export interface Api {
  session(): Promise<Session>;
  terms(customerAddress: string): Promise<TermsResponse>;
  submit(request: SignaturesRequest): Promise<Session>;
}

export const httpApi = (token: string): Api => {
  const base = `/authorize/${encodeURIComponent(token)}`;
  return {
    session: () => call<Session>(`${base}/session`),
    terms: (customerAddress) => call<TermsResponse>(`${base}/terms`, { customer_address: customerAddress }),
    submit: (request) => call<Session>(`${base}/signatures`, request),
  };
};
