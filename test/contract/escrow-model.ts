/**
 * A plain TypeScript model of MandateEscrow: what every operation should do to mandates, holds and
 * token balances, and which error it should fail with. The model-based test runs random sequences
 * against both and compares them after every step.
 */

import type { Hex } from "viem";
import { periodIndexAt } from "../../src/ledger/period.ts";
import type { Address } from "./harness.ts";

export const MAX_UINT = 2n ** 256n - 1n;

export interface ModelMandate {
  readonly id: Hex;
  readonly customer: Address;
  payee: Address;
  token: Address;
  anchor: number;
  cap: bigint;
  approvalPeriods: number;
  operator: Address;
  holdSeconds: number;
  nonce: bigint;
  approvalLeft: bigint;
  chargedPeriodPlusOne: number;
  revoked: boolean;
}

export interface ModelHold {
  readonly mandateId: Hex;
  readonly period: number;
  readonly token: Address;
  amount: bigint;
  releaseAt: number;
}

export type Result = { readonly error?: string };

/** A one-time payment's deposit terms and the address they derive (computed off-chain). */
export interface ModelDeposit {
  readonly terms: {
    readonly paymentId: Hex;
    readonly payee: Address;
    readonly token: Address;
    readonly operator: Address;
    readonly holdSeconds: bigint;
  };
  readonly address: Address;
}

export interface ModelPaymentHold {
  readonly token: Address;
  amount: bigint;
  releaseAt: number;
}

const ZERO = "0x0000000000000000000000000000000000000000";

const key = (...parts: string[]) => parts.map((p) => p.toLowerCase()).join(":");

export class EscrowModel {
  now: number;
  readonly escrow: Address;
  mandates = new Map<string, ModelMandate>();
  holds = new Map<string, ModelHold>();
  balances = new Map<string, bigint>();
  allowances = new Map<string, bigint>();
  /** Every (mandate, period) ever charged with a hold: the places to compare hold views at. */
  heldCharges = new Set<string>();
  /** Open payment holds by deposit address. */
  paymentHolds = new Map<string, ModelPaymentHold>();
  /** `operator:relayer` pairs the operator named (`setRelayer`). */
  relayers = new Set<string>();

  constructor(escrow: Address, now: number) {
    this.escrow = escrow;
    this.now = now;
  }

  clone(): EscrowModel {
    const copy = new EscrowModel(this.escrow, this.now);
    copy.mandates = new Map([...this.mandates].map(([k, v]) => [k, { ...v }]));
    copy.holds = new Map([...this.holds].map(([k, v]) => [k, { ...v }]));
    copy.balances = new Map(this.balances);
    copy.allowances = new Map(this.allowances);
    copy.heldCharges = new Set(this.heldCharges);
    copy.paymentHolds = new Map([...this.paymentHolds].map(([k, v]) => [k, { ...v }]));
    copy.relayers = new Set(this.relayers);
    return copy;
  }

  balance(token: Address, owner: Address): bigint {
    return this.balances.get(key(token, owner)) ?? 0n;
  }
  allowance(token: Address, owner: Address): bigint {
    return this.allowances.get(key(token, owner)) ?? 0n;
  }
  mandate(id: Hex): ModelMandate | undefined {
    return this.mandates.get(id.toLowerCase());
  }
  hold(id: Hex, period: number): ModelHold | undefined {
    return this.holds.get(key(id, String(period)));
  }

  private move(token: Address, from: Address, to: Address, amount: bigint) {
    this.balances.set(key(token, from), this.balance(token, from) - amount);
    this.balances.set(key(token, to), this.balance(token, to) + amount);
  }

  /** Whether `caller` is the operator or one of the relayers it named. */
  actsFor(caller: Address, operator: Address): boolean {
    return caller.toLowerCase() === operator.toLowerCase() || this.relayers.has(key(operator, caller));
  }

  /** `setRelayer`: the caller, as an operator, names or removes a relayer of its own. */
  setRelayer(caller: Address, relayer: Address, allowed: boolean): Result {
    if (relayer === ZERO) return { error: "InvalidTerms" };
    if (allowed) this.relayers.add(key(caller, relayer));
    else this.relayers.delete(key(caller, relayer));
    return {};
  }

  mint(token: Address, to: Address, amount: bigint): Result {
    this.balances.set(key(token, to), this.balance(token, to) + amount);
    return {};
  }

  approve(token: Address, owner: Address, amount: bigint): Result {
    this.allowances.set(key(token, owner), amount);
    return {};
  }

  /**
   * `authorize`, the terms signed by `signer` (default: the customer). Only the customer's signature
   * counts; anyone else's is `InvalidSignature`, checked after the deadline as the contract checks it.
   */
  authorize(
    t: {
      id: Hex;
      customer: Address;
      payee: Address;
      token: Address;
      cap: bigint;
      anchor: number;
      approvalPeriods: number;
      operator: Address;
      holdSeconds: number;
      nonce: bigint;
      deadline: number;
    },
    permit?: { value: bigint },
    signer: Address = t.customer,
  ): Result {
    if (this.now > t.deadline) return { error: "SignatureExpired" };
    if (signer !== t.customer) return { error: "InvalidSignature" };
    const existing = this.mandate(t.id);
    if (existing) {
      if (existing.revoked) return { error: "Revoked" };
      if (existing.payee !== t.payee || existing.token !== t.token || existing.anchor !== t.anchor)
        return { error: "TermsMismatch" };
    }
    if (t.nonce <= (existing?.nonce ?? 0n)) return { error: "StaleNonce" };
    this.mandates.set(t.id.toLowerCase(), {
      id: t.id,
      customer: t.customer,
      payee: t.payee,
      token: t.token,
      anchor: t.anchor,
      cap: t.cap,
      approvalPeriods: t.approvalPeriods,
      operator: t.operator,
      holdSeconds: t.holdSeconds,
      nonce: t.nonce,
      approvalLeft: t.cap * BigInt(t.approvalPeriods),
      chargedPeriodPlusOne: existing?.chargedPeriodPlusOne ?? 0,
      revoked: false,
    });
    if (permit) this.approve(t.token, t.customer, permit.value);
    return {};
  }

  revoke(id: Hex, caller: Address): Result {
    const m = this.mandate(id);
    if (!m) return { error: "UnknownMandate" };
    if (caller !== m.customer) return { error: "NotCustomer" };
    if (m.revoked) return { error: "Revoked" };
    m.revoked = true;
    return {};
  }

  /** `revokeWithSignature`: a revocation signed by `signer`, valid until `deadline`, submitted by anyone. */
  revokeWithSignature(id: Hex, signer: Address, deadline: number): Result {
    const m = this.mandate(id);
    if (!m) return { error: "UnknownMandate" };
    if (this.now > deadline) return { error: "SignatureExpired" };
    if (m.revoked) return { error: "Revoked" };
    if (signer !== m.customer) return { error: "InvalidSignature" };
    m.revoked = true;
    return {};
  }

  /** `lowerCap`: the operator or the payee narrows the cap; the approval left is capped at cap × periods. */
  lowerCap(id: Hex, newCap: bigint, caller: Address): Result {
    const m = this.mandate(id);
    if (!m) return { error: "UnknownMandate" };
    if (!this.actsFor(caller, m.operator) && caller !== m.payee) return { error: "NotOperator" };
    if (m.revoked) return { error: "Revoked" };
    if (newCap === 0n || newCap >= m.cap) return { error: "CapNotLowered" };
    const limit = newCap * BigInt(m.approvalPeriods);
    m.cap = newCap;
    if (m.approvalLeft > limit) m.approvalLeft = limit;
    return {};
  }

  charge(id: Hex, amount: bigint, caller: Address): Result {
    const m = this.mandate(id);
    if (!m) return { error: "UnknownMandate" };
    if (!this.actsFor(caller, m.operator)) return { error: "NotOperator" };
    if (m.revoked) return { error: "Revoked" };
    if (amount === 0n || amount > m.cap) return { error: "CapExceeded" };
    const period = periodIndexAt(m.anchor, this.now);
    if (period === undefined) return { error: "MandateNotStarted" };
    if (m.chargedPeriodPlusOne > period) return { error: "PeriodAlreadyCharged" };
    if (amount > m.approvalLeft) return { error: "ApprovalExhausted" };
    if (this.balance(m.token, m.customer) < amount) return { error: "InsufficientBalance" };
    const allowance = this.allowance(m.token, m.customer);
    if (allowance < amount) return { error: "InsufficientAllowance" };
    if (allowance !== MAX_UINT) this.allowances.set(key(m.token, m.customer), allowance - amount);
    m.approvalLeft -= amount;
    m.chargedPeriodPlusOne = period + 1;
    if (m.holdSeconds === 0) {
      this.move(m.token, m.customer, m.payee, amount);
    } else {
      this.move(m.token, m.customer, this.escrow, amount);
      this.holds.set(key(id, String(period)), {
        mandateId: id,
        period,
        token: m.token,
        amount,
        releaseAt: this.now + m.holdSeconds,
      });
      this.heldCharges.add(key(id, String(period)));
    }
    return {};
  }

  /** All or nothing: the first failure is the batch's failure and nothing changes. */
  chargeMany(
    items: ReadonlyArray<{ id: Hex; amount: bigint }>,
    caller: Address,
  ): { result: Result; next: EscrowModel } {
    const next = this.clone();
    for (const item of items) {
      const result = next.charge(item.id, item.amount, caller);
      if (result.error) return { result, next: this };
    }
    return { result: {}, next };
  }

  release(id: Hex, period: number): Result {
    const h = this.hold(id, period);
    if (!h) return { error: "NoHold" };
    if (this.now < h.releaseAt) return { error: "HoldNotOver" };
    const m = this.mandate(id);
    if (!m) return { error: "model: hold without mandate" };
    this.holds.delete(key(id, String(period)));
    this.move(h.token, this.escrow, m.payee, h.amount);
    return {};
  }

  /**
   * `releaseMany`: a charge with nothing held (released or returned already, never held, listed twice) is
   * passed over; any other failure (a hold not over) is the batch's failure and nothing changes. `released`:
   * the charges paid, in order (one `Released` event each).
   */
  releaseMany(items: ReadonlyArray<{ id: Hex; period: number }>): {
    result: Result;
    next: EscrowModel;
    released: ReadonlyArray<{ id: Hex; period: number; amount: bigint }>;
  } {
    const next = this.clone();
    const released: { id: Hex; period: number; amount: bigint }[] = [];
    for (const item of items) {
      const amount = next.hold(item.id, item.period)?.amount;
      const result = next.release(item.id, item.period);
      if (result.error === "NoHold") continue;
      if (result.error) return { result, next: this, released: [] };
      released.push({ ...item, amount: amount ?? 0n });
    }
    return { result: {}, next, released };
  }

  returnCharge(id: Hex, period: number, caller: Address): Result {
    const m = this.mandate(id);
    if (!m || (!this.actsFor(caller, m.operator) && caller !== m.payee)) return { error: "NotOperator" };
    const h = this.hold(id, period);
    if (!h) return { error: "NoHold" };
    if (this.now >= h.releaseAt) return { error: "HoldOver" };
    this.holds.delete(key(id, String(period)));
    this.move(h.token, this.escrow, m.customer, h.amount);
    return {};
  }

  /** A payer's plain transfer to a deposit address (after minting it, so the payer's balance is unchanged). */
  pay(d: ModelDeposit, amount: bigint): Result {
    return this.mint(d.terms.token, d.address, amount);
  }

  paymentHold(d: ModelDeposit): ModelPaymentHold | undefined {
    return this.paymentHolds.get(d.address.toLowerCase());
  }

  private sweepOne(d: ModelDeposit): Result {
    const t = d.terms;
    if (t.payee === ZERO || t.token === ZERO || t.operator === ZERO) return { error: "InvalidTerms" };
    const amount = this.balance(t.token, d.address);
    if (amount === 0n) return {};
    if (t.holdSeconds === 0n) {
      this.move(t.token, d.address, t.payee, amount);
    } else {
      this.move(t.token, d.address, this.escrow, amount);
      const open = this.paymentHold(d);
      // A top-up joins an open hold and keeps its time.
      this.paymentHolds.set(d.address.toLowerCase(), {
        token: t.token,
        amount: (open?.amount ?? 0n) + amount,
        releaseAt: open && open.amount > 0n ? open.releaseAt : this.now + Number(t.holdSeconds),
      });
    }
    return {};
  }

  private releasePayment(d: ModelDeposit): Result {
    const h = this.paymentHold(d);
    if (!h) return { error: "NoHold" };
    if (this.now < h.releaseAt) return { error: "HoldNotOver" };
    this.paymentHolds.delete(d.address.toLowerCase());
    this.move(d.terms.token, this.escrow, d.terms.payee, h.amount);
    return {};
  }

  /**
   * `sweep` and `releasePayments`: any failure is the batch's failure and nothing changes, except that
   * `releasePayments` passes over a payment with nothing held, as a sweep passes over an empty address.
   * `paid`: the deposits swept or released, in order, with their amounts (one event each).
   */
  paymentBatch(
    kind: "sweep" | "releasePayments",
    deposits: readonly ModelDeposit[],
  ): { result: Result; next: EscrowModel; paid: ReadonlyArray<{ deposit: ModelDeposit; amount: bigint }> } {
    const next = this.clone();
    const paid: { deposit: ModelDeposit; amount: bigint }[] = [];
    for (const d of deposits) {
      const amount = kind === "sweep" ? next.balance(d.terms.token, d.address) : next.paymentHold(d)?.amount;
      const result = kind === "sweep" ? next.sweepOne(d) : next.releasePayment(d);
      if (kind === "releasePayments" && result.error === "NoHold") continue;
      if (result.error) return { result, next: this, paid: [] };
      if (amount !== undefined && amount > 0n) paid.push({ deposit: d, amount });
    }
    return { result: {}, next, paid };
  }

  returnPayment(d: ModelDeposit, to: Address, caller: Address): Result {
    if (!this.actsFor(caller, d.terms.operator) && caller !== d.terms.payee) return { error: "NotOperator" };
    if (to === ZERO) return { error: "InvalidTerms" };
    const h = this.paymentHold(d);
    if (!h) return { error: "NoHold" };
    if (this.now >= h.releaseAt) return { error: "HoldOver" };
    this.paymentHolds.delete(d.address.toLowerCase());
    this.move(d.terms.token, this.escrow, to, h.amount);
    return {};
  }

  /** What the escrow should hold of `token`: its open charge holds and payment holds. */
  openHoldsTotal(token: Address): bigint {
    let total = 0n;
    for (const h of this.holds.values()) if (h.token === token) total += h.amount;
    for (const h of this.paymentHolds.values()) if (h.token === token) total += h.amount;
    return total;
  }
}
