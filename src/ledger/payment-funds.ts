/**
 * The ledger's rules for one-time payments' funds, per deposit address: a sweep adds what it moved
 * (to the payee, or to the payment's hold, which then covers everything held); a release pays the whole
 * hold after its time, a return gives it back before. Pure, like ledger.ts, and as strict: a log that
 * breaks the escrow's rules stops the indexer.
 */
import { Result } from "effect";
import {
  type Fact,
  type LedgerState,
  type LogPosition,
  type PaymentFundsState,
  type PaymentLog,
  paymentFundsKey,
} from "./types.ts";
import { type Applied, type LedgerViolation, violation } from "./violation.ts";

const withPayment = (state: LedgerState, funds: PaymentFundsState): LedgerState => ({
  ...state,
  payments: new Map(state.payments).set(paymentFundsKey(funds.chainId, funds.depositAddress), funds),
});

/**
 * A payment fact's key names the outcome: a deposit address's funds after this sweep (its total
 * received), or the end of the hold that covered everything received so far. A sweep mined again
 * elsewhere by a reorg keeps its key; a different sweep cannot take it, totals only grow.
 */
const paymentFact = (
  kind: "payment.received" | "payment.released" | "payment.returned",
  at: LogPosition,
  funds: PaymentFundsState,
  amount: bigint,
  details: Fact["details"],
): Fact => ({
  key: `${at.chainId}:${kind}:${funds.depositAddress}:${funds.received}`,
  kind,
  at,
  mandateId: null,
  chargeId: null,
  paymentId: funds.paymentId,
  amount,
  customer: null,
  payee: funds.payee,
  token: funds.token,
  details: { deposit_address: funds.depositAddress, ...details },
});

export const applyPaymentLog = (
  state: LedgerState,
  log: PaymentLog,
): Result.Result<Applied, LedgerViolation> => {
  const { at } = log;
  const current = state.payments.get(paymentFundsKey(at.chainId, log.depositAddress));
  if (
    current &&
    (current.paymentId !== log.paymentId || current.payee !== log.payee || current.token !== log.token)
  )
    return violation(at, "payment log does not match its deposit address's terms");
  switch (log.kind) {
    case "PaymentReceived": {
      if (log.amount === 0n) return violation(at, "empty sweep");
      const heldBefore = current?.held ?? 0n;
      if (log.releaseAt === 0) {
        if (log.held !== 0n || heldBefore !== 0n)
          return violation(at, "sweep without hold on a held payment");
      } else {
        if (log.held !== heldBefore + log.amount) return violation(at, "held funds do not add up");
        // A top-up joins the open hold and keeps its time; a new hold ends after its sweep.
        if (heldBefore > 0n ? log.releaseAt !== current?.releaseAt : log.releaseAt <= at.timestamp)
          return violation(at, "the hold's time does not match the escrow's rule");
      }
      const funds: PaymentFundsState = {
        chainId: at.chainId,
        depositAddress: log.depositAddress,
        paymentId: log.paymentId,
        payee: log.payee,
        token: log.token,
        received: (current?.received ?? 0n) + log.amount,
        held: log.held,
        releaseAt: log.releaseAt,
        released: current?.released ?? 0n,
        returned: current?.returned ?? 0n,
        updatedAt: at,
      };
      return Result.succeed({
        state: withPayment(state, funds),
        facts: [
          paymentFact("payment.received", at, funds, log.amount, {
            release_at: log.releaseAt,
            held: log.held.toString(),
            received: funds.received.toString(),
          }),
        ],
      });
    }
    case "PaymentReleased":
    case "PaymentReturned": {
      const released = log.kind === "PaymentReleased";
      if (!current || current.held === 0n) return violation(at, `${log.kind} of a payment with nothing held`);
      if (log.amount !== current.held) return violation(at, `${log.kind} does not match the held funds`);
      if (released ? at.timestamp < current.releaseAt : at.timestamp >= current.releaseAt)
        return violation(at, released ? "release before the hold ended" : "return after the hold ended");
      const funds: PaymentFundsState = {
        ...current,
        held: 0n,
        releaseAt: 0,
        released: current.released + (released ? log.amount : 0n),
        returned: current.returned + (released ? 0n : log.amount),
        updatedAt: at,
      };
      return Result.succeed({
        state: withPayment(state, funds),
        facts: [
          paymentFact(
            released ? "payment.released" : "payment.returned",
            at,
            funds,
            log.amount,
            released ? { release_at: current.releaseAt } : { release_at: current.releaseAt, to: log.to },
          ),
        ],
      });
    }
  }
};
