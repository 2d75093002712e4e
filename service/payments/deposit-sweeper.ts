/**
 * The deposit sweeper: moves what arrived at deposit addresses to the merchants (or into their holds)
 * with the escrow's `sweep`, up to SWEEP_BATCH deposit addresses per transaction, paid by the relayer.
 * Which addresses are swept, and when, is the store's rule (`lockSweepable`): one sweep for a payment
 * paid in several transfers, none for dust before expiry, at most MAX_SWEEPS per payment, so someone
 * sending dust to a payment's address cannot make the relayer spend without end. A payment is locked
 * and marked in the transaction that records the relayer's transaction, so processes never sweep twice;
 * a sweep that reverted is due again.
 */
import { Effect } from "effect";
import { SqlClient } from "effect/sql";
import { ChainClients, escrowCallData } from "../chains/chain-clients.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { newId } from "../ids.ts";
import type { Worker } from "../workers/worker.ts";
import { depositTermsOf } from "./deposit-terms.ts";
import { DEPOSITS_CHANNEL, PaymentStore } from "./payment-store.ts";

export const SWEEP_BATCH = 50;
export const MAX_SWEEPS = 10;
/** Transactions per chain and pass at most (a pass goes on while its batches come back full). */
const BATCHES_PER_PASS = 40;

/** One batch of a chain's sweepable deposit addresses; returns how many were swept. */
const sweepBatch = (chain: ResolvedChain, now: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const relayer = yield* Relayer;
    const store = yield* PaymentStore;
    return yield* sql.withTransaction(
      Effect.gen(function* () {
        const due = yield* store.lockSweepable(chain.id, now, MAX_SWEEPS, SWEEP_BATCH);
        if (due.length === 0) return 0;
        const purpose = `sweep:${chain.id}:${yield* newId("request")}`;
        const sent = yield* relayer
          .submit(chain.id, {
            to: chain.escrow.address,
            data: escrowCallData("sweep", [due.map(depositTermsOf)]),
            purpose,
          })
          .pipe(
            Effect.as(true),
            Effect.catchTag("RelayerError", (error) =>
              Effect.as(
                Effect.logWarning("sweep not submitted; will retry").pipe(
                  Effect.annotateLogs({ chain: chain.id, payments: due.length, reason: error.message }),
                ),
                false,
              ),
            ),
          );
        if (!sent) return 0;
        yield* store.recordSwept(
          due.map((row) => row.id),
          purpose,
        );
        return due.length;
      }),
    );
  });

export const sweepDeposits = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const clients = yield* ChainClients;
  const store = yield* PaymentStore;
  yield* store.retryRevertedSweeps;
  yield* Effect.forEach(
    registry.all,
    (chain) =>
      Effect.gen(function* () {
        if (!(yield* store.workOn(chain.id)).sweep_due) return;
        const now = yield* clients.latestTime(chain);
        for (let i = 0; i < BATCHES_PER_PASS; i++) {
          if ((yield* sweepBatch(chain, now)) < SWEEP_BATCH) return;
        }
      }).pipe(
        Effect.catchTag("ChainUnavailable", (error) =>
          Effect.logWarning("deposit sweeper could not read the chain").pipe(
            Effect.annotateLogs({ chain: chain.id, reason: error.message }),
          ),
        ),
      ),
    { concurrency: "unbounded", discard: true },
  );
});

export const depositSweeper: Worker<
  SqlClient.SqlClient | ChainRegistry | ChainClients | Relayer | PaymentStore
> = {
  name: "deposit-sweeper",
  pass: sweepDeposits,
  interval: "500 millis",
  wakeOn: DEPOSITS_CHANNEL,
};
