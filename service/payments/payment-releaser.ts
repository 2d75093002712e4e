/**
 * The payment releaser: pays held payment funds to the merchant once their hold is over (the service
 * pays the gas), up to RELEASE_BATCH payments per transaction. A payment of the batch that someone else
 * released first (anyone may) is passed over by the contract: the batch mines with the others, and that
 * payment's pending action is cleared by the other transaction's `PaymentReleased` fact, which leaves
 * nothing held (PaymentStore.recordHold). A batch the chain would still refuse (a token refusing the
 * payee's transfer, say) is sent one by one instead. Rows are locked and marked in the transaction that
 * records the relayer's transaction; a release that reverted is cleared and tried again.
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
import type { PaymentRow } from "./payment-object.ts";
import { PaymentStore } from "./payment-store.ts";

const RELEASE_BATCH = 50;

const releaseChain = (chain: ResolvedChain, now: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const relayer = yield* Relayer;
    const store = yield* PaymentStore;
    const send = (rows: ReadonlyArray<PaymentRow>) =>
      Effect.gen(function* () {
        const purpose = `payment-release:${chain.id}:${yield* newId("request")}`;
        yield* relayer.submit(chain.id, {
          to: chain.escrow.address,
          data: escrowCallData("releasePayments", [rows.map(depositTermsOf)]),
          purpose,
        });
        for (const row of rows) yield* store.startAction(row.id, "release", purpose, null);
      });
    yield* sql.withTransaction(
      Effect.gen(function* () {
        const due = yield* store.lockReleasable(chain.id, now, RELEASE_BATCH);
        if (due.length === 0) return;
        const together = yield* send(due).pipe(
          Effect.as(true),
          Effect.catchTag("RelayerError", (error) =>
            error.reason === "simulation_failed" && due.length > 1
              ? Effect.succeed(false)
              : Effect.fail(error),
          ),
        );
        if (together) return;
        for (const row of due)
          yield* send([row]).pipe(
            Effect.catchTag("RelayerError", (error) =>
              Effect.logWarning("payment release not submitted; will retry").pipe(
                Effect.annotateLogs({ payment: row.id, reason: error.message }),
              ),
            ),
          );
      }),
    );
  });

export const releasePaymentHolds = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const clients = yield* ChainClients;
  const store = yield* PaymentStore;
  yield* store.clearRevertedActions;
  yield* Effect.forEach(
    registry.all.filter((chain) => chain.escrow_available),
    (chain) =>
      Effect.gen(function* () {
        if (!(yield* store.workOn(chain.id)).held) return;
        const now = yield* clients.latestTime(chain);
        yield* releaseChain(chain, now);
      }).pipe(
        Effect.catchTags({
          ChainUnavailable: (error) =>
            Effect.logWarning("payment releaser could not read the chain").pipe(
              Effect.annotateLogs({ chain: chain.id, reason: error.message }),
            ),
          RelayerError: (error) =>
            Effect.logWarning("payment release not submitted; will retry").pipe(
              Effect.annotateLogs({ chain: chain.id, reason: error.message }),
            ),
        }),
      ),
    { concurrency: "unbounded", discard: true },
  );
});

export const paymentReleaser: Worker<
  SqlClient.SqlClient | ChainRegistry | ChainClients | Relayer | PaymentStore
> = {
  name: "payment-releaser",
  pass: releasePaymentHolds,
  interval: "1 second",
};
