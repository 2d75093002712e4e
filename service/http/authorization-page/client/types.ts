/** The JSON the page exchanges with the service (see docs/authorization-page.md). */

import type { AuthorizationSession } from "../../../mandates/authorization-session.ts";

import type { Address, TypedData } from "../../hosted-page/client/wallet.ts";

export type { Address, TypedData } from "../../hosted-page/client/wallet.ts";

export type MandateStatus = "pending" | "active" | "requires_authorization" | "revoked";

/** The session as the service sends it: the server's type, imported for its shape only (erased by the bundler). */
export type Session = AuthorizationSession;

export interface TermsResponse {
  readonly terms: TypedData;
  readonly permit: TypedData | null;
  readonly approve: { readonly to: Address; readonly data: `0x${string}` } | null;
}

export interface SignaturesRequest {
  readonly customer_address: Address;
  readonly terms: TypedData["message"];
  readonly signature: string;
  readonly permit_signature: string | null;
}
