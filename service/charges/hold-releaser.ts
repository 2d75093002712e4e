/**
 * The hold releaser: releases every held charge whose hold ended, on mandates this service operates, so
 * merchants get their money without asking (the service pays the gas). Up to RELEASE_BATCH charges go in
 * one `releaseMany` transaction, ordered by token and payee so that the contract pays each merchant's run
 * with one transfer (about a quarter of the gas of one `release` each). A charge of the batch that
 * someone else released (anyone may) or the payee returned first is passed over by the contract: the
 * batch mines with the others, and that charge's pending action is cleared by the other transaction's
 * `Released`/`Returned` fact (ChargeStore.recordEnded), like any charge's. A batch the chain would still
 * refuse (a token refusing one payee's transfer, say) is sent one by one instead.
 * Charges are locked `FOR UPDATE SKIP LOCKED` and marked in the same transaction, so replicas never
 * release twice; a release that reverted is cleared and tried again.
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

const RELEASE_BATCH = 50;

type Releasable = {
  readonly id: string;
  readonly period: number;
  readonly mandate_onchain_id: string;
  readonly payee_address: string;
  readonly token_address: string;
};

/** Same token and payee next to each other: `releaseMany` pays each such run with one transfer. */
const byPayout = (a: Releasable, b: Releasable) =>
  a.token_address.localeCompare(b.token_address) || a.payee_address.localeCompare(b.payee_address);

/** Submits the releases due on every chain with escrow; returns how many charges were submitted. */
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
    /** One transaction for `charges`, marked as under way; a relayer refusal marks nothing. */
    const send = (charges: ReadonlyArray<Releasable>) =>
      Effect.gen(function* () {
        // A fresh purpose per attempt: a release that reverted is cleared and tried again.
        const purpose = `release:${chain.id}:${yield* newId("request")}`;
        const ordered = [...charges].sort(byPayout);
        const data = escrowCallData("releaseMany", [
          ordered.map((c) => c.mandate_onchain_id as Hex),
          ordered.map((c) => c.period),
        ]);
        yield* relayer.submit(chain.id, { to: chain.escrow.address, data, purpose });
        for (const charge of charges) yield* store.startAction(charge.id, "release", purpose);
        return charges.length;
      });
    const sendOrWarn = (charges: ReadonlyArray<Releasable>) =>
      send(charges).pipe(
        Effect.catchTag("RelayerError", (error) =>
          Effect.as(
            Effect.logWarning("release not submitted; will retry").pipe(
              Effect.annotateLogs({ charges: charges.map((c) => c.id).join(","), reason: error.message }),
            ),
            0,
          ),
        ),
      );
    submitted += yield* sql.withTransaction(
      Effect.gen(function* () {
        const due = yield* store.lockReleasable(chain.id, now.value, operator, RELEASE_BATCH);
        if (due.length <= 1) return due.length === 0 ? 0 : yield* sendOrWarn(due);
        const together = yield* send(due).pipe(
          Effect.catchTag("RelayerError", (error) =>
            error.reason === "simulation_failed" ? Effect.succeed(undefined) : Effect.fail(error),
          ),
          Effect.catchTag("RelayerError", (error) =>
            Effect.as(
              Effect.logWarning("releases not submitted; will retry").pipe(
                Effect.annotateLogs({ charges: due.length, reason: error.message }),
              ),
              0,
            ),
          ),
        );
        if (together !== undefined) return together;
        let count = 0;
        for (const charge of due) count += yield* sendOrWarn([charge]);
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
