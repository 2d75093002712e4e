/**
 * Background work on charges: releasing holds that ended (the service pays the gas, so merchants get
 * their money without asking) and settling charges whose transaction reverted on chain.
 */
import { Effect } from "effect";
import { SqlClient } from "effect/sql";
import type { Hex } from "viem";
import { ChainClients, escrowCallData } from "../chains/chain-clients.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { newId } from "../ids.ts";
import type { Worker } from "../workers/workers.ts";
import { Charges } from "./charges.ts";

const RELEASE_BATCH = 100;

/** Submits a release for every held charge whose hold ended, on mandates this service operates. */
export const releaseDueHolds = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const registry = yield* ChainRegistry;
  const clients = yield* ChainClients;
  const relayer = yield* Relayer;
  const operator = relayer.address?.toLowerCase();
  if (operator === undefined) return 0;
  let submitted = 0;
  for (const chain of registry.all) {
    if (!chain.escrow_available) continue;
    const now = yield* clients.latestTime(chain).pipe(Effect.option);
    if (now._tag === "None") continue;
    submitted += yield* sql.withTransaction(
      Effect.gen(function* () {
        const due = yield* sql<{ id: string; period: number; onchain_id: string; mandate_onchain_id: Hex }>`
          SELECT c.id, c.period, c.onchain_id, m.onchain_id AS mandate_onchain_id
          FROM billing.charges c JOIN billing.mandates m ON m.id = c.mandate_id
          WHERE c.chain_id = ${chain.id} AND c.status = 'succeeded' AND c.release_at > 0
            AND c.release_at <= ${now.value} AND c.pending_action IS NULL
            AND lower(m.operator_address) = ${operator}
          ORDER BY c.release_at LIMIT ${RELEASE_BATCH}
          FOR UPDATE OF c SKIP LOCKED`;
        let count = 0;
        for (const charge of due) {
          // A fresh purpose per attempt: a release that reverted is cleared and tried again.
          const purpose = `release:${chain.id}:${charge.onchain_id}:${yield* newId("request")}`;
          const sent = yield* relayer
            .submit(chain.id, {
              to: chain.escrow.address,
              data: escrowCallData("release", [charge.mandate_onchain_id, charge.period]),
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
          yield* sql`UPDATE billing.charges SET pending_action = 'release', pending_action_purpose = ${purpose},
              updated_at = now() WHERE id = ${charge.id}`;
          count++;
        }
        return count;
      }),
    );
  }
  return submitted;
});

export const holdReleaser: Worker<SqlClient.SqlClient | ChainRegistry | ChainClients | Relayer> = {
  name: "hold-releaser",
  pass: Effect.asVoid(releaseDueHolds),
  interval: "1 second",
};

export const chargeOutcomes: Worker<Charges> = {
  name: "charge-outcomes",
  pass: Effect.asVoid(Effect.flatMap(Effect.service(Charges), (charges) => charges.resolveReverted)),
  interval: "1 second",
};
