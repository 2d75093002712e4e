/**
 * Payments a reorg took back. The fact relay reports a payment once its sweep is `confirmations` deep;
 * with few confirmations a deeper reorg can still remove the sweep (and the payer's transfer before
 * it). Each pass compares the sweeps, releases and returns applied in the last REORG_WINDOW blocks with
 * the indexer's facts: one no longer on the chain up to the confirmed block is taken out of the
 * payment (a paid payment becomes `reversed`, and `payment.reversed` is raised); if the chain later
 * has it again, the relay applies it again.
 *
 * The indexer's head is read before and after the facts, and a pass that saw it move decides nothing:
 * the facts and the head a pass compares are then one state of the index, never a reorg half applied.
 */
import { Effect } from "effect";
import { SqlClient } from "effect/sql";
import type { ResolvedChain } from "../chains/config.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { ONCHAIN_SCHEMA } from "../db/client.ts";
import { Outbox } from "../events/outbox.ts";
import type { Worker } from "../workers/worker.ts";
import { factsPresent, headOf, heldFunds } from "./onchain-payments.ts";
import { PaymentStore } from "./payment-store.ts";
import { PaymentTransitions } from "./payment-transitions.ts";

/** How deep below the confirmed block a reorg is still looked for. */
export const REORG_WINDOW = 256n;

const checkChain = (chain: ResolvedChain) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const store = yield* PaymentStore;
    const transitions = yield* PaymentTransitions;
    const outbox = yield* Outbox;
    const before = yield* headOf(chain.id);
    if (before === undefined) return 0;
    const confirmed = before.number - BigInt(chain.confirmations);
    const standing = yield* store.standingFacts(chain.id, confirmed - REORG_WINDOW, confirmed);
    if (standing.length === 0) return 0;
    const present = yield* factsPresent(
      standing.map((fact) => fact.fact_key),
      confirmed,
    );
    const after = yield* headOf(chain.id);
    if (after?.number !== before.number || after.hash !== before.hash) return 0;
    const gone = standing.filter((fact) => !present.has(fact.fact_key));
    if (gone.length === 0) return 0;
    const payments = [...new Set(gone.map((fact) => fact.payment_id))].sort();
    const deposits = new Map<string, string>();
    for (const id of payments) deposits.set(id, (yield* store.reload(id)).deposit_address);
    const funds = yield* heldFunds(chain.id, [...deposits.values()]);
    const at = before.timestamp;
    yield* sql.withTransaction(
      Effect.gen(function* () {
        for (const id of payments) yield* store.lock(id);
        for (const fact of gone) {
          if (!(yield* store.factStands(chain.id, fact.fact_key))) continue;
          yield* store.markFactGone(chain.id, fact.fact_key);
          const amount = BigInt(fact.amount);
          const events =
            fact.kind === "received"
              ? yield* transitions.steps(fact.payment_id, [{ kind: "unreceived", amount }], { now: at })
              : fact.kind === "returned"
                ? yield* transitions.steps(fact.payment_id, [{ kind: "received", amount }], { now: at })
                : [];
          yield* outbox.insert(events);
          yield* Effect.logWarning("a payment's chain fact was reorged out").pipe(
            Effect.annotateLogs({ chain: chain.id, payment: fact.payment_id, fact: fact.fact_key }),
          );
        }
        yield* store.recordHolds(
          payments.map((id) => {
            const held = funds.get(deposits.get(id) ?? "");
            return {
              id,
              held: held?.held ?? "0",
              releaseAt: held && held.releaseAt > 0 ? held.releaseAt : null,
            };
          }),
        );
      }),
    );
    return gone.length;
  });

export const checkPaymentReorgs = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  yield* Effect.forEach(registry.all, checkChain, { concurrency: "unbounded", discard: true });
});

export const paymentReorgs: Worker<
  SqlClient.SqlClient | ChainRegistry | PaymentStore | PaymentTransitions | Outbox
> = {
  name: "payment-reorgs",
  pass: checkPaymentReorgs,
  interval: "1 second",
  wakeOn: `${ONCHAIN_SCHEMA}_live_query`,
};
