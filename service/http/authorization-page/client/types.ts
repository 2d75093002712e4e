/** The JSON the page exchanges with the service (see docs/authorization-page.md). */

import type { AuthorizationSession } from "../../../mandates/authorization-session.ts";

export type Address = `0x${string}`;

export type MandateStatus = "pending" | "active" | "requires_authorization" | "revoked";

/** The session as the service sends it: the server's type, imported for its shape only (erased by the bundler). */
export type Session = AuthorizationSession;

/** EIP-712 typed data as `eth_signTypedData_v4` takes it (JSON). */
export interface TypedData {
  readonly domain: Readonly<Record<string, unknown>>;
  readonly types: Readonly<Record<string, ReadonlyArray<{ readonly name: string; readonly type: string }>>>;
  readonly primaryType: string;
  readonly message: Readonly<Record<string, unknown>>;
}

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
