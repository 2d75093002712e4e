/**
 * Confirmed chain facts about one-time payments, applied to the payment records: a sweep of a deposit
 * address adds to what was received (and to the hold), a release ends the hold, a return takes the funds
 * back (the payment is reversed). Each fact applies once: a fact already applied and standing is
 * passed over, so the relay may read it again after a rewind. Runs inside the relay's transaction.
 */
import { Context, Effect, Layer } from "effect";
import type { PaymentInput } from "../../src/ledger/payment-machine.ts";
import type { NewEvent } from "../events/outbox.ts";
import { type PaymentFactRecord, PaymentStore } from "./payment-store.ts";
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

const kindOf = (fact: PaymentFact): PaymentFactRecord["kind"] =>
  fact.kind === "payment.received" ? "received" : fact.kind === "payment.released" ? "released" : "returned";

const make = Effect.gen(function* () {
  const store = yield* PaymentStore;
  const transitions = yield* PaymentTransitions;

  /**
   * Applies facts of `merchantId`'s payout address in chain order, each naming another payment, with a
   * few statements whatever their number. Returns the keys of the facts applied (a fact already applied
   * and standing counts as applied; one naming no payment of theirs is left out, and the relay records it
   * as skipped) and the events they raised (often none).
   */
  const applyRun = (facts: ReadonlyArray<PaymentFact>, merchantId: string) =>
    Effect.gen(function* () {
      const [first] = facts;
      if (first === undefined) return { applied: new Set<string>(), events: [] as NewEvent[] };
      const { chainId } = first;
      const depositOf = (fact: PaymentFact) => String(fact.details.deposit_address ?? "").toLowerCase();
      const rows = new Map(
        (yield* store.lockByDeposits(chainId, facts.map(depositOf))).map((row) => [row.deposit_address, row]),
      );
      const matched = facts.flatMap((fact) => {
        const row = rows.get(depositOf(fact));
        return row === undefined ||
          row.merchant_id !== merchantId ||
          row.onchain_id.toLowerCase() !== fact.paymentId?.toLowerCase() ||
          row.token_address.toLowerCase() !== fact.token.toLowerCase() ||
          fact.amount === null
          ? []
          : [{ fact, row, amount: fact.amount, kind: kindOf(fact) }];
      });
      const standing = yield* store.standingKeys(
        chainId,
        matched.map(({ fact }) => fact.key),
      );
      const fresh = matched.filter(({ fact }) => !standing.has(fact.key));
      yield* store.recordFacts(
        fresh.map(({ fact, row, amount, kind }) => ({
          paymentId: row.id,
          fact: {
            chainId,
            key: fact.key,
            kind,
            amount,
            blockNumber: fact.blockNumber,
            blockHash: fact.blockHash,
            txHash: fact.txHash,
            logIndex: fact.logIndex,
            timestamp: fact.timestamp,
          },
        })),
      );
      yield* store.recordHolds(
        fresh.flatMap(({ fact, row, kind }): { id: string; held: string; releaseAt: number | null }[] => {
          if (kind !== "received") return [{ id: row.id, held: "0", releaseAt: null }];
          const releaseAt = Number(fact.details.release_at ?? 0);
          return releaseAt > 0 ? [{ id: row.id, held: String(fact.details.held ?? "0"), releaseAt }] : [];
        }),
      );
      // The rows locked above: the machine's amounts and status are as they were read.
      const stepped = yield* transitions.stepEach(
        fresh.flatMap(({ fact, row, amount, kind }) =>
          kind === "released"
            ? []
            : [
                {
                  row,
                  input: { kind, amount: BigInt(amount) } satisfies PaymentInput,
                  cause: {
                    now: Number(fact.timestamp),
                    onchain: {
                      chainId,
                      blockNumber: BigInt(fact.blockNumber),
                      txHash: fact.txHash,
                      logIndex: fact.logIndex,
                    },
                  },
                },
              ],
        ),
      );
      return {
        applied: new Set(matched.map(({ fact }) => fact.key)),
        events: stepped.flatMap((result) => (result.ok && result.event ? [result.event] : [])),
      };
    });

  return { applyRun };
});

export class PaymentFacts extends Context.Service<PaymentFacts>()("PaymentFacts", { make }) {
  static readonly layer = Layer.effect(PaymentFacts, make);
}
