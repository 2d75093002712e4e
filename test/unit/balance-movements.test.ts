/**
 * The balance movements (service/balances/movements.ts) against the escrow's rule, written from the rule:
 * over random histories of charges and payments (held or not), releases and returns of what is held, and
 * reorgs that undo the latest events, the ledger's accounts equal what the escrow holds, what reached the
 * payout address and what went back to customers; every movement sums to zero; and no account of the
 * merchant goes negative. A reorg is undone by writing reversals: the ledger here only ever grows.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  balancesAfter,
  type MoneyFact,
  type Movement,
  movementOf,
  reversalOf,
} from "../../service/balances/movements.ts";

/** What the chain did, as the escrow sees it. */
type ChainEvent =
  | {
      readonly kind: "in";
      readonly what: "charge" | "payment";
      readonly id: number;
      readonly amount: bigint;
      readonly held: boolean;
    }
  | { readonly kind: "end"; readonly id: number; readonly released: boolean };

interface Hold {
  readonly what: "charge" | "payment";
  readonly amount: bigint;
  state: "held" | "released" | "returned";
}

/** The escrow's side: holds and direct payments, replayed from the events still on the chain. */
const escrowAfter = (events: readonly ChainEvent[]) => {
  const holds = new Map<number, Hold>();
  let direct = 0n;
  for (const event of events) {
    if (event.kind === "in") {
      if (event.held) holds.set(event.id, { what: event.what, amount: event.amount, state: "held" });
      else direct += event.amount;
    } else {
      const hold = holds.get(event.id);
      if (hold) hold.state = event.released ? "released" : "returned";
    }
  }
  const sum = (state: Hold["state"]) =>
    [...holds.values()].filter((h) => h.state === state).reduce((total, h) => total + h.amount, 0n);
  return {
    holds,
    pending: sum("held"),
    paidOut: direct + sum("released"),
    sentBack: sum("returned"),
  };
};

/** The fact the indexer makes of a chain event (the one the relay applies). */
const factOf = (event: ChainEvent, holds: ReadonlyMap<number, Hold>): MoneyFact => {
  if (event.kind === "in")
    return {
      kind: event.what === "charge" ? "charge.succeeded" : "payment.received",
      amount: event.amount,
      held: event.held,
    };
  const hold = holds.get(event.id);
  if (!hold) throw new Error(`no hold ${event.id}`);
  const prefix = hold.what === "charge" ? "charge" : "payment";
  return { kind: `${prefix}.${event.released ? "released" : "returned"}`, amount: hold.amount };
};

type Step =
  | {
      readonly kind: "in";
      readonly what: "charge" | "payment";
      readonly amount: bigint;
      readonly held: boolean;
    }
  | { readonly kind: "end"; readonly pick: number; readonly released: boolean }
  | { readonly kind: "reorg"; readonly depth: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  fc.record({
    kind: fc.constant("in" as const),
    what: fc.constantFrom("charge" as const, "payment" as const),
    amount: fc.bigInt({ min: 1n, max: 10n ** 12n }),
    held: fc.boolean(),
  }),
  fc.record({ kind: fc.constant("end" as const), pick: fc.nat(), released: fc.boolean() }),
  fc.record({ kind: fc.constant("reorg" as const), depth: fc.integer({ min: 1, max: 4 }) }),
);

describe("balance movements", () => {
  it("sum to zero, and a reversal undoes exactly its movement", () => {
    fc.assert(
      fc.property(
        fc.constantFrom(
          "charge.succeeded" as const,
          "payment.received" as const,
          "charge.released" as const,
          "charge.returned" as const,
          "payment.released" as const,
          "payment.returned" as const,
        ),
        fc.bigInt({ min: 1n, max: 10n ** 30n }),
        fc.boolean(),
        (kind, amount, held) => {
          const movement = movementOf({ kind, amount, held } as MoneyFact);
          expect(movement.legs[0].amount + movement.legs[1].amount).toBe(0n);
          const undone = balancesAfter([movement, reversalOf(movement)]);
          expect(undone).toEqual({ customer: 0n, pending: 0n, available: 0n, returned: 0n });
          expect(reversalOf(movement).reversal).toBe(true);
        },
      ),
    );
  });

  it("over any history with reorgs, the accounts are what the escrow holds, paid out and sent back", () => {
    fc.assert(
      fc.property(fc.array(step, { minLength: 1, maxLength: 60 }), (steps) => {
        const onChain: ChainEvent[] = [];
        /** Movements in the order the ledger wrote them; each chain event's own, in chain order. */
        const ledger: Movement[] = [];
        const movementOfEvent: Movement[] = [];
        let nextId = 0;
        for (const s of steps) {
          if (s.kind === "in") {
            const event: ChainEvent = {
              kind: "in",
              what: s.what,
              id: nextId++,
              amount: s.amount,
              held: s.held,
            };
            const movement = movementOf(factOf(event, escrowAfter(onChain).holds));
            onChain.push(event);
            movementOfEvent.push(movement);
            ledger.push(movement);
          } else if (s.kind === "end") {
            const held = [...escrowAfter(onChain).holds.entries()].filter(([, h]) => h.state === "held");
            const chosen = held[s.pick % Math.max(1, held.length)];
            if (chosen === undefined) continue;
            const event: ChainEvent = { kind: "end", id: chosen[0], released: s.released };
            const movement = movementOf(factOf(event, escrowAfter(onChain).holds));
            onChain.push(event);
            movementOfEvent.push(movement);
            ledger.push(movement);
          } else {
            // The chain's latest events leave it: the ledger reverses their movements, latest first.
            for (let i = 0; i < s.depth && onChain.length > 0; i++) {
              onChain.pop();
              const undone = movementOfEvent.pop();
              if (undone) ledger.push(reversalOf(undone));
            }
          }
          const escrow = escrowAfter(onChain);
          const balances = balancesAfter(ledger);
          expect(balances.pending).toBe(escrow.pending);
          expect(balances.available).toBe(escrow.paidOut);
          expect(balances.returned).toBe(escrow.sentBack);
          expect(balances.customer).toBe(-(escrow.pending + escrow.paidOut + escrow.sentBack));
          for (const account of ["pending", "available", "returned"] as const)
            expect(balances[account] >= 0n, account).toBe(true);
          for (const movement of ledger) expect(movement.legs[0].amount + movement.legs[1].amount).toBe(0n);
        }
      }),
      { numRuns: Number(process.env.PROPERTY_RUNS ?? 200) },
    );
  });
});
