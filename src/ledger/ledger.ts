/**
 * The ledger: a pure function from (state, decoded escrow log) to (state, facts). No I/O, no clock, no
 * randomness: the same logs always give the same state and facts. It re-checks the contract's rules
 * (cap, one charge per period, approval, the period of the block's time) and refuses a log that breaks
 * them, so a wrong chain or a wrong decoding stops the indexer instead of storing a wrong balance.
 */
import { Result } from "effect";
import { applyPaymentLog } from "./payment-funds.ts";
import { periodIndexAt } from "./period.ts";
import {
  type ChargeState,
  chargeKey,
  type EscrowLog,
  type Fact,
  type LedgerState,
  type LogPosition,
  type MandateState,
  mandateKey,
  relayerKey,
} from "./types.ts";
import { type Applied, type LedgerViolation, violation } from "./violation.ts";

export { type Applied, LedgerViolation } from "./violation.ts";

const withMandate = (state: LedgerState, mandate: MandateState): LedgerState => ({
  ...state,
  mandates: new Map(state.mandates).set(mandateKey(mandate.chainId, mandate.mandateId), mandate),
});

const withCharge = (state: LedgerState, charge: ChargeState): LedgerState => ({
  ...state,
  charges: new Map(state.charges).set(chargeKey(charge.chainId, charge.chargeId), charge),
});

const fact = (
  kind: Fact["kind"],
  key: string,
  at: LogPosition,
  mandate: Pick<MandateState, "mandateId" | "customer" | "payee" | "token">,
  details: Fact["details"],
  chargeId: string | null = null,
  amount: bigint | null = null,
): Fact => ({
  key: `${at.chainId}:${kind}:${key}`,
  kind,
  at,
  mandateId: mandate.mandateId,
  chargeId,
  paymentId: null,
  amount,
  customer: mandate.customer,
  payee: mandate.payee,
  token: mandate.token,
  details,
});

export const applyLog = (state: LedgerState, log: EscrowLog): Result.Result<Applied, LedgerViolation> => {
  if (log.kind === "PaymentReceived" || log.kind === "PaymentReleased" || log.kind === "PaymentReturned")
    return applyPaymentLog(state, log);
  const { at } = log;
  if (log.kind === "RelayerSet") {
    const relayers = new Set(state.relayers);
    const key = relayerKey(at.chainId, log.operator, log.relayer);
    if (log.allowed) relayers.add(key);
    else relayers.delete(key);
    return Result.succeed({ state: { ...state, relayers }, facts: [] });
  }
  const mandate = state.mandates.get(mandateKey(at.chainId, log.mandateId));
  switch (log.kind) {
    case "MandateAuthorized": {
      if (mandate?.status === "revoked") return violation(at, "authorization of a revoked mandate");
      if (mandate && log.nonce <= mandate.nonce) return violation(at, "authorization with a stale nonce");
      if (
        mandate &&
        (mandate.payee !== log.payee || mandate.token !== log.token || mandate.anchor !== log.anchor)
      )
        return violation(at, "re-authorization changed payee, token or anchor");
      if (log.approval !== log.cap * BigInt(log.approvalPeriods))
        return violation(at, "approval is not cap x periods");
      const next: MandateState = {
        chainId: at.chainId,
        mandateId: log.mandateId,
        customer: log.customer,
        payee: log.payee,
        token: log.token,
        cap: log.cap,
        anchor: log.anchor,
        approvalPeriods: log.approvalPeriods,
        operator: log.operator,
        holdSeconds: log.holdSeconds,
        nonce: log.nonce,
        approvalLeft: log.approval,
        lastChargedPeriod: mandate?.lastChargedPeriod ?? -1,
        status: "active",
        authorizedAt: at,
        updatedAt: at,
      };
      return Result.succeed({
        state: withMandate(state, next),
        facts: [
          fact("mandate.authorized", `${log.mandateId}:${log.nonce}`, at, log, {
            nonce: log.nonce.toString(),
            cap: log.cap.toString(),
            approval_periods: log.approvalPeriods,
            approval: log.approval.toString(),
            operator: log.operator,
            hold_seconds: log.holdSeconds,
            anchor: log.anchor,
            // A re-signature says which cap it replaced, so a raise (or a lower one) is known from the fact alone.
            ...(mandate ? { previous_cap: mandate.cap.toString() } : {}),
          }),
        ],
      });
    }
    case "MandateRevoked": {
      if (!mandate) return violation(at, "revocation of an unknown mandate");
      if (mandate.status === "revoked") return violation(at, "second revocation");
      return Result.succeed({
        state: withMandate(state, { ...mandate, status: "revoked", updatedAt: at }),
        facts: [fact("mandate.revoked", log.mandateId, at, mandate, { nonce: mandate.nonce.toString() })],
      });
    }
    case "CapLowered": {
      if (!mandate) return violation(at, "cap lowered on an unknown mandate");
      if (mandate.status !== "active") return violation(at, "cap lowered on a revoked mandate");
      if (
        log.by !== mandate.operator &&
        log.by !== mandate.payee &&
        !state.relayers.has(relayerKey(at.chainId, mandate.operator, log.by))
      )
        return violation(at, "cap lowered by neither the operator (nor a relayer of its) nor the payee");
      if (log.previousCap !== mandate.cap) return violation(at, "previous cap does not match");
      if (log.cap === 0n || log.cap >= mandate.cap) return violation(at, "cap not lowered");
      const limit = log.cap * BigInt(mandate.approvalPeriods);
      if (log.approvalLeft !== (mandate.approvalLeft < limit ? mandate.approvalLeft : limit))
        return violation(at, "approval left is not capped at cap x periods");
      return Result.succeed({
        state: withMandate(state, {
          ...mandate,
          cap: log.cap,
          approvalLeft: log.approvalLeft,
          updatedAt: at,
        }),
        // The cap only falls between two signatures, so (nonce, cap) names each lowering once.
        facts: [
          fact("mandate.cap_lowered", `${log.mandateId}:${mandate.nonce}:${log.cap}`, at, mandate, {
            nonce: mandate.nonce.toString(),
            previous_cap: log.previousCap.toString(),
            cap: log.cap.toString(),
            approval_left: log.approvalLeft.toString(),
            by: log.by,
          }),
        ],
      });
    }
    case "Charged": {
      if (!mandate) return violation(at, "charge of an unknown mandate");
      if (mandate.status !== "active") return violation(at, "charge of a revoked mandate");
      if (log.amount === 0n || log.amount > mandate.cap) return violation(at, "charge above the cap");
      if (periodIndexAt(mandate.anchor, at.timestamp) !== log.period)
        return violation(at, "charge period does not match the block's time");
      if (log.period <= mandate.lastChargedPeriod) return violation(at, "second charge in a period");
      if (log.amount > mandate.approvalLeft) return violation(at, "charge above the approval left");
      if (log.approvalLeft !== mandate.approvalLeft - log.amount)
        return violation(at, "approval left does not add up");
      if (log.releaseAt !== (mandate.holdSeconds === 0 ? 0 : at.timestamp + mandate.holdSeconds))
        return violation(at, "release time does not match the hold");
      const charge: ChargeState = {
        chainId: at.chainId,
        chargeId: log.chargeId,
        mandateId: log.mandateId,
        period: log.period,
        amount: log.amount,
        customer: log.customer,
        payee: log.payee,
        token: log.token,
        status: log.releaseAt === 0 ? "settled" : "held",
        releaseAt: log.releaseAt,
        chargedAt: at,
        endedAt: null,
      };
      const next = withMandate(state, {
        ...mandate,
        approvalLeft: log.approvalLeft,
        lastChargedPeriod: log.period,
        updatedAt: at,
      });
      return Result.succeed({
        state: withCharge(next, charge),
        facts: [
          fact(
            "charge.succeeded",
            log.chargeId,
            at,
            mandate,
            { period: log.period, release_at: log.releaseAt, approval_left: log.approvalLeft.toString() },
            log.chargeId,
            log.amount,
          ),
        ],
      });
    }
    case "Released":
    case "Returned": {
      const charge = state.charges.get(chargeKey(at.chainId, log.chargeId));
      if (charge?.status !== "held") return violation(at, `${log.kind} of a charge that is not held`);
      if (charge.amount !== log.amount || charge.mandateId !== log.mandateId || charge.period !== log.period)
        return violation(at, `${log.kind} does not match the held charge`);
      const released = log.kind === "Released";
      if (released ? at.timestamp < charge.releaseAt : at.timestamp >= charge.releaseAt)
        return violation(at, released ? "release before the hold ended" : "return after the hold ended");
      return Result.succeed({
        state: withCharge(state, { ...charge, status: released ? "released" : "returned", endedAt: at }),
        facts: [
          fact(
            released ? "charge.released" : "charge.returned",
            log.chargeId,
            at,
            charge,
            { period: log.period, release_at: charge.releaseAt },
            log.chargeId,
            log.amount,
          ),
        ],
      });
    }
  }
};

/** Folds logs in chain order; stops at the first violation. */
export const applyLogs = (
  state: LedgerState,
  logs: Iterable<EscrowLog>,
): Result.Result<{ readonly state: LedgerState; readonly facts: readonly Fact[] }, LedgerViolation> => {
  let current = state;
  const facts: Fact[] = [];
  for (const log of logs) {
    const applied = applyLog(current, log);
    if (Result.isFailure(applied)) return applied;
    current = applied.success.state;
    facts.push(...applied.success.facts);
  }
  return Result.succeed({ state: current, facts });
};
