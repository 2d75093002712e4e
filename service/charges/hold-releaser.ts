/**
 * The hold releaser: submits a release for every held charge whose hold ended, on mandates this service
 * operates, so merchants get their money without asking (the service pays the gas). A charge is locked
 * `FOR UPDATE SKIP LOCKED` and marked in the same transaction, so replicas never release twice.
 */
import { Effect } from "effect";
import { SqlClient } from "effect/sql";
import type { Hex } from "viem";
import { ChainClients, escrowCallData } from "../chains/chain-clients.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { newId } from "../ids.ts";
import type { Worker } from "../workers/worker.ts";
import { ChargeStore } from "./charge-store.ts";

const RELEASE_BATCH = 100;

/** Submits the releases due on every chain with escrow; returns how many were submitted. */
export const releaseDueHolds = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const registry = yield* ChainRegistry;
  const clients = yield* ChainClients;
  const relayer = yield* Relayer;
  const store = yield* ChargeStore;
  const operator = relayer.address?.toLowerCase();
  if (operator === undefined) return 0;
  let submitted = 0;
  for (const chain of registry.all) {
    if (!chain.escrow_available) continue;
    const now = yield* clients.latestTime(chain).pipe(Effect.option);
    if (now._tag === "None") continue;
    submitted += yield* sql.withTransaction(
      Effect.gen(function* () {
        const due = yield* store.lockReleasable(chain.id, now.value, operator, RELEASE_BATCH);
        let count = 0;
        for (const charge of due) {
          // A fresh purpose per attempt: a release that reverted is cleared and tried again.
          const purpose = `release:${chain.id}:${charge.onchain_id}:${yield* newId("request")}`;
          const sent = yield* relayer
            .submit(chain.id, {
              to: chain.escrow.address,
              data: escrowCallData("release", [charge.mandate_onchain_id as Hex, charge.period]),
              purpose,
            })
            .pipe(
              Effect.as(true),
              Effect.catchTag("RelayerError", (error) =>
                Effect.as(
                  Effect.logWarning("release not submitted; will retry").pipe(
                    Effect.annotateLogs({ charge: charge.id, reason: error.message }),
                  ),
                  false,
                ),
              ),
            );
          if (!sent) continue;
          yield* store.startAction(charge.id, "release", purpose);
          count++;
        }
        return count;
      }),
    );
  }
  return submitted;
});

export const holdReleaser: Worker<
  SqlClient.SqlClient | ChainRegistry | ChainClients | Relayer | ChargeStore
> = {
  name: "hold-releaser",
  pass: Effect.asVoid(releaseDueHolds),
  interval: "1 second",
};
