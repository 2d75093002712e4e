/** The JSON the page exchanges with the service (see docs/authorization-page.md). */

export type Address = `0x${string}`;

export type MandateStatus = "pending" | "active" | "requires_authorization" | "revoked";

export interface Session {
  readonly object: "authorization_session";
  readonly mandate: string;
  readonly livemode: boolean;
  readonly status: MandateStatus;
  readonly needs_signature: boolean;
  readonly merchant: { readonly name: string };
  readonly chain: {
    readonly id: number;
    readonly name: string;
    readonly rpc_url: string | null;
    readonly native_currency: { readonly name: string; readonly symbol: string; readonly decimals: number };
  };
  readonly token: {
    readonly symbol: string;
    readonly address: Address;
    readonly decimals: number;
    readonly permit: boolean;
  };
  readonly cap_decimal: string;
  readonly period: string;
  readonly approval_periods: number;
  readonly approval_decimal: string;
  readonly hold_seconds: number;
  readonly customer_address: Address | null;
  readonly pending_transaction: string | null;
}

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
