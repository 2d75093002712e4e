/**
 * The ledger's vocabulary: decoded escrow logs in, derived state and business facts out.
 * Logs are decoded with these schemas at the indexer's boundary; everything here is plain data.
 */
import { Schema } from "effect";

const Address = Schema.String.check(Schema.isPattern(/^0x[0-9a-f]{40}$/u));
const Bytes32 = Schema.String.check(Schema.isPattern(/^0x[0-9a-f]{64}$/u));
const Uint = Schema.BigInt.check(Schema.isGreaterThanOrEqualToBigInt(0n));
const Count = Schema.Int.check(Schema.isGreaterThanOrEqualTo(0));

/** Where a log sits on its chain: enough for a finance team to find it again. */
export const LogPosition = Schema.Struct({
  chainId: Count,
  blockNumber: Count,
  blockHash: Bytes32,
  timestamp: Count,
  txHash: Bytes32,
  logIndex: Count,
});
export type LogPosition = typeof LogPosition.Type;

export const MandateAuthorized = Schema.Struct({
  kind: Schema.Literal("MandateAuthorized"),
  at: LogPosition,
  mandateId: Bytes32,
  customer: Address,
  payee: Address,
  token: Address,
  cap: Uint,
  anchor: Count,
  approvalPeriods: Count,
  operator: Address,
  holdSeconds: Count,
  nonce: Uint,
  approval: Uint,
});

export const MandateRevoked = Schema.Struct({
  kind: Schema.Literal("MandateRevoked"),
  at: LogPosition,
  mandateId: Bytes32,
  customer: Address,
});

/** `setRelayer`: `relayer` may (`allowed`) or may no longer act for `operator`. */
export const RelayerSet = Schema.Struct({
  kind: Schema.Literal("RelayerSet"),
  at: LogPosition,
  operator: Address,
  relayer: Address,
  allowed: Schema.Boolean,
});

/** `lowerCap`: the operator (or a relayer of its) or the payee narrowed the cap; `approvalLeft` is what stays approved. */
export const CapLowered = Schema.Struct({
  kind: Schema.Literal("CapLowered"),
  at: LogPosition,
  mandateId: Bytes32,
  previousCap: Uint,
  cap: Uint,
  approvalLeft: Uint,
  by: Address,
});

export const Charged = Schema.Struct({
  kind: Schema.Literal("Charged"),
  at: LogPosition,
  mandateId: Bytes32,
  chargeId: Bytes32,
  period: Count,
  amount: Uint,
  customer: Address,
  payee: Address,
  token: Address,
  releaseAt: Count,
  approvalLeft: Uint,
});

export const Released = Schema.Struct({
  kind: Schema.Literal("Released"),
  at: LogPosition,
  mandateId: Bytes32,
  chargeId: Bytes32,
  period: Count,
  amount: Uint,
  payee: Address,
});

export const Returned = Schema.Struct({
  kind: Schema.Literal("Returned"),
  at: LogPosition,
  mandateId: Bytes32,
  chargeId: Bytes32,
  period: Count,
  amount: Uint,
  customer: Address,
});

/** A deposit address's balance swept to the payee (`releaseAt` 0) or into the payment's hold. */
export const PaymentReceived = Schema.Struct({
  kind: Schema.Literal("PaymentReceived"),
  at: LogPosition,
  paymentId: Bytes32,
  payee: Address,
  depositAddress: Address,
  token: Address,
  amount: Uint,
  releaseAt: Count,
  /** All of the payment's funds under hold after this sweep (0 without hold). */
  held: Uint,
});

export const PaymentReleased = Schema.Struct({
  kind: Schema.Literal("PaymentReleased"),
  at: LogPosition,
  paymentId: Bytes32,
  payee: Address,
  depositAddress: Address,
  token: Address,
  amount: Uint,
});

export const PaymentReturned = Schema.Struct({
  kind: Schema.Literal("PaymentReturned"),
  at: LogPosition,
  paymentId: Bytes32,
  payee: Address,
  depositAddress: Address,
  token: Address,
  amount: Uint,
  to: Address,
});

export const EscrowLog = Schema.Union([
  MandateAuthorized,
  MandateRevoked,
  RelayerSet,
  CapLowered,
  Charged,
  Released,
  Returned,
  PaymentReceived,
  PaymentReleased,
  PaymentReturned,
]);
export type EscrowLog = typeof EscrowLog.Type;
export type PaymentLog = Extract<EscrowLog, { readonly depositAddress: string }>;
export type RelayerLog = Extract<EscrowLog, { readonly kind: "RelayerSet" }>;
export type MandateLog = Exclude<EscrowLog, PaymentLog | RelayerLog>;
export const decodeEscrowLog = Schema.decodeUnknownResult(EscrowLog);

export interface MandateState {
  readonly chainId: number;
  readonly mandateId: string;
  readonly customer: string;
  readonly payee: string;
  readonly token: string;
  readonly cap: bigint;
  readonly anchor: number;
  readonly approvalPeriods: number;
  readonly operator: string;
  readonly holdSeconds: number;
  /** Signature version: the nonce of the latest signature. */
  readonly nonce: bigint;
  readonly approvalLeft: bigint;
  /** Index of the last charged period, -1 before the first charge. */
  readonly lastChargedPeriod: number;
  readonly status: "active" | "revoked";
  readonly authorizedAt: LogPosition;
  readonly updatedAt: LogPosition;
}

export type ChargeStatus = "held" | "settled" | "released" | "returned";

export interface ChargeState {
  readonly chainId: number;
  readonly chargeId: string;
  readonly mandateId: string;
  readonly period: number;
  readonly amount: bigint;
  readonly customer: string;
  readonly payee: string;
  readonly token: string;
  /** held: waiting for release; settled: paid straight to the payee; released / returned: hold ended. */
  readonly status: ChargeStatus;
  /** 0 when the charge was not held. */
  readonly releaseAt: number;
  readonly chargedAt: LogPosition;
  /** The release or return, once it happened. */
  readonly endedAt: LogPosition | null;
}

/**
 * A one-time payment's funds as the chain has moved them, per deposit address (which commits to the
 * payment id, payee, token, operator and hold, so two payments never share one).
 */
export interface PaymentFundsState {
  readonly chainId: number;
  readonly depositAddress: string;
  readonly paymentId: string;
  readonly payee: string;
  readonly token: string;
  /** Everything swept from the deposit address so far. */
  readonly received: bigint;
  /** Under hold now; 0 without hold or after a release or return. */
  readonly held: bigint;
  /** When the held funds may be released (0 when nothing is held). */
  readonly releaseAt: number;
  readonly released: bigint;
  readonly returned: bigint;
  readonly updatedAt: LogPosition;
}

export interface LedgerState {
  /** Keyed by `${chainId}:${mandateId}`. */
  readonly mandates: ReadonlyMap<string, MandateState>;
  /** Keyed by `${chainId}:${chargeId}`. */
  readonly charges: ReadonlyMap<string, ChargeState>;
  /** Keyed by `${chainId}:${depositAddress}`. */
  readonly payments: ReadonlyMap<string, PaymentFundsState>;
  /** The relayers operators have named and not removed, as `relayerKey`s. */
  readonly relayers: ReadonlySet<string>;
}

export const relayerKey = (chainId: number, operator: string, relayer: string) =>
  `${chainId}:${operator.toLowerCase()}:${relayer.toLowerCase()}`;

export type FactKind =
  | "mandate.authorized"
  | "mandate.revoked"
  | "mandate.cap_lowered"
  | "charge.succeeded"
  | "charge.released"
  | "charge.returned"
  | "payment.received"
  | "payment.released"
  | "payment.returned";

/**
 * A business outcome the API reports. `key` names the outcome itself, not the log that carried it
 * (a charge is one per mandate and period; an authorization one per nonce), so a replay, a reindex,
 * or a reorg that re-mines the same transaction elsewhere yields the same key.
 */
export interface Fact {
  readonly key: string;
  readonly kind: FactKind;
  readonly at: LogPosition;
  /** Set for mandate.* and charge.* facts. */
  readonly mandateId: string | null;
  readonly chargeId: string | null;
  /** Set for payment.* facts. */
  readonly paymentId: string | null;
  readonly amount: bigint | null;
  /**
   * The fixed parties, so a fact can be attributed and reported on its own. A payment has no customer
   * on chain (a plain transfer does not say who paid): null.
   */
  readonly customer: string | null;
  readonly payee: string;
  readonly token: string;
  /**
   * What the outcome carried at the time (terms of this signature; period and hold of this charge;
   * deposit address and hold of this payment).
   */
  readonly details: Readonly<Record<string, string | number>>;
}

export const mandateKey = (chainId: number, mandateId: string) => `${chainId}:${mandateId}`;
export const chargeKey = (chainId: number, chargeId: string) => `${chainId}:${chargeId}`;
export const paymentFundsKey = (chainId: number, depositAddress: string) => `${chainId}:${depositAddress}`;
export const emptyLedger: LedgerState = {
  mandates: new Map(),
  charges: new Map(),
  payments: new Map(),
  relayers: new Set(),
};
