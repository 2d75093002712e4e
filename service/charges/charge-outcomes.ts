/**
 * The charge outcome worker. A charge whose transaction reverted on chain (a race: funds moved between
 * simulation and mining, or the customer's wallet was blacklisted) fails with the reason the chain gives
 * now (`token_paused` when the token's issuer paused it meanwhile: not the customer's doing), and the
 * merchant hears of it as of any failed charge; releases and returns that reverted are cleared, so the hold releaser or the
 * merchant can try again.
 */
import { Effect } from "effect";
import { SqlClient } from "effect/sql";
import type { Hex } from "viem";
import { ChainClients } from "../chains/chain-clients.ts";
import { ChainRegistry } from "../chains/registry.ts";
import type { TokenStates } from "../chains/token-states.ts";
import { MandateStore } from "../mandates/mandate-store.ts";
import type { Worker } from "../workers/worker.ts";
import { ChargeFailureEvents } from "./charge-failure-events.ts";
import { classifyChargeRevert } from "./charge-failures.ts";
import { explainChargeRevert } from "./charge-reverts.ts";
import { ChargeStore } from "./charge-store.ts";

const BATCH = 100;

/** One pass; returns how many charges failed. */
export const resolveReverted = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const registry = yield* ChainRegistry;
  const clients = yield* ChainClients;
  const charges = yield* ChargeStore;
  const mandates = yield* MandateStore;
  const failureEvents = yield* ChargeFailureEvents;
  const failed = yield* sql.withTransaction(
    Effect.gen(function* () {
      const ids = yield* charges.lockReverted(BATCH);
      for (const id of ids) {
        const charge = yield* charges.reload(id);
        const mandate = yield* mandates.reload(charge.mandate_id);
        const chain = registry.byId(charge.chain_id);
        const revert = chain
          ? yield* clients
              .simulateOutcome(chain, mandate.operator_address as Hex, "charge", [
                mandate.onchain_id,
                BigInt(charge.amount),
              ])
              .pipe(Effect.orElseSucceed(() => undefined))
          : undefined;
        const classified = chain
          ? yield* explainChargeRevert(chain, mandate, revert)
          : classifyChargeRevert(revert?.errorName);
        const failureCode = classified.kind === "fail" ? classified.failureCode : "processing_error";
        yield* charges.recordReverted(id, failureCode, classified.message);
        yield* failureEvents.failed(mandate, id, failureCode);
      }
      return ids.length;
    }),
  );
  yield* charges.clearRevertedActions;
  return failed;
});

export const chargeOutcomes: Worker<
  | SqlClient.SqlClient
  | ChainRegistry
  | ChainClients
  | ChargeStore
  | MandateStore
  | ChargeFailureEvents
  | TokenStates
> = {
  name: "charge-outcomes",
  pass: Effect.asVoid(resolveReverted),
  interval: "1 second",
};
