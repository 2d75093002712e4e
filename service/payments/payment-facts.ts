/**
 * Confirmed chain facts about one-time payments, applied to the payment records: a sweep of a deposit
 * address adds to what was received (and to the hold), a release ends the hold, a return takes the funds
 * back (the payment is reversed). Each fact applies once: a fact already applied and standing is
 * passed over, so the relay may read it again after a rewind. Runs inside the relay's transaction.
 */
import { Context, Effect, Layer } from "effect";
import type { PaymentInput } from "../../src/ledger/payment-machine.ts";
import type { NewEvent } from "../events/outbox.ts";
import { PaymentStore } from "./payment-store.ts";
import { PaymentTransitions } from "./payment-transitions.ts";

/** What the relay knows of a payment fact (its row in the indexer's `fact` table). */
export interface PaymentFact {
  readonly key: string;
  readonly kind: "payment.received" | "payment.released" | "payment.returned";
  readonly chainId: number;
  readonly blockNumber: string;
  readonly blockHash: string;
  readonly timestamp: string;
  readonly txHash: string;
  readonly logIndex: number;
  readonly paymentId: string | null;
  readonly amount: string | null;
  readonly token: string;
  readonly details: Readonly<Record<string, string | number>>;
}

const make = Effect.gen(function* () {
  const store = yield* PaymentStore;
  const transitions = yield* PaymentTransitions;

  /**
   * Applies a fact of `merchantId`'s payout address; undefined when it names no payment of theirs (the
   * relay records it as skipped), else the events it raised (often none).
   */
  const apply = (fact: PaymentFact, merchantId: string) =>
    Effect.gen(function* () {
      const deposit = String(fact.details.deposit_address ?? "");
      const row = yield* store.lockByDeposit(fact.chainId, deposit);
      if (
        row === undefined ||
        row.merchant_id !== merchantId ||
        row.onchain_id.toLowerCase() !== fact.paymentId?.toLowerCase() ||
        row.token_address.toLowerCase() !== fact.token.toLowerCase() ||
        fact.amount === null
      )
        return undefined;
      if (yield* store.factStands(fact.chainId, fact.key)) return [] as NewEvent[];
      const kind =
        fact.kind === "payment.received"
          ? "received"
          : fact.kind === "payment.released"
            ? "released"
            : "returned";
      yield* store.recordFact(row.id, {
        chainId: fact.chainId,
        key: fact.key,
        kind,
        amount: fact.amount,
        blockNumber: fact.blockNumber,
        blockHash: fact.blockHash,
        txHash: fact.txHash,
        logIndex: fact.logIndex,
        timestamp: fact.timestamp,
      });
      const releaseAt = Number(fact.details.release_at ?? 0);
      if (kind === "received") {
        if (releaseAt > 0) yield* store.recordHold(row.id, String(fact.details.held ?? "0"), releaseAt);
      } else yield* store.recordHold(row.id, "0", null);
      const input: PaymentInput | undefined =
        kind === "received"
          ? { kind: "received", amount: BigInt(fact.amount) }
          : kind === "returned"
            ? { kind: "returned", amount: BigInt(fact.amount) }
            : undefined;
      if (input === undefined) return [] as NewEvent[];
      // The row locked above: the machine's amounts and status are as it read them.
      const stepped = yield* transitions.step(row, input, {
        now: Number(fact.timestamp),
        onchain: {
          chainId: fact.chainId,
          blockNumber: BigInt(fact.blockNumber),
          txHash: fact.txHash,
          logIndex: fact.logIndex,
        },
      });
      return stepped.ok && stepped.event ? [stepped.event] : ([] as NewEvent[]);
    });

  return { apply };
});

export class PaymentFacts extends Context.Service<PaymentFacts>()("PaymentFacts", { make }) {
  static readonly layer = Layer.effect(PaymentFacts, make);
}
