/**
 * The hold releaser: releases every held charge whose hold ended, on mandates this service operates, so
 * merchants get their money without asking (the service pays the gas). Up to RELEASE_BATCH charges go in
 * one `releaseMany` transaction, ordered by token and payee so that the contract pays each merchant's run
 * with one transfer (about a quarter of the gas of one `release` each). A charge of the batch that
 * someone else released (anyone may) or the payee returned first is passed over by the contract: the
 * batch mines with the others, and that charge's pending action is cleared by the other transaction's
 * `Released`/`Returned` fact (ChargeStore.recordEnded), like any charge's. A batch the chain would still
 * refuse (the token refusing one payee's transfer) is split until the refused charges stand alone
 * (batch-isolation.ts) and the rest goes out in the same pass: one merchant's blacklisted payout address
 * never holds back another merchant's release. A refused release is held back
 * (chains/blocked-transfers.ts: `release_failure`, one `charge.release_failed` per episode, tried again
 * after minutes, or as soon as the address is cleared); nothing is sent for a token its issuer has
 * paused. Charges are locked `FOR UPDATE SKIP LOCKED` and marked in the same transaction, so replicas
 * never release twice; a release that reverted is cleared and tried again.
 */
import { Clock, Effect } from "effect";
import { SqlClient } from "effect/sql";
import type { Hex } from "viem";
import { isolateFailures, submitPassing } from "../chains/batch-isolation.ts";
import { explainTransfer, nextAttemptAt } from "../chains/blocked-transfers.ts";
import type { ChainClients } from "../chains/chain-clients.ts";
import { ChainHeads } from "../chains/chain-heads.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { GasCosts } from "../chains/gas-costs.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { TokenStates } from "../chains/token-states.ts";
import { Outbox } from "../events/outbox.ts";
import { newId } from "../ids.ts";
import type { Worker } from "../workers/worker.ts";
import { toChargeObject } from "./charge-object.ts";
import { ChargeStore, type Releasable } from "./charge-store.ts";

const RELEASE_BATCH = 50;

/** Same token and payee next to each other: `releaseMany` pays each such run with one transfer. */
const byPayout = (a: Releasable, b: Releasable) =>
  a.token_address.localeCompare(b.token_address) || a.payee_address.localeCompare(b.payee_address);

const releaseCall = (charges: ReadonlyArray<Releasable>) => ({
  functionName: "releaseMany" as const,
  args: [charges.map((c) => c.mandate_onchain_id as Hex), charges.map((c) => c.period)],
});

/** Held-back releases whose payout address the token no longer blacklists are due at once. */
const retryCleared = (chain: ResolvedChain, at: Date) =>
  Effect.gen(function* () {
    const store = yield* ChargeStore;
    const states = yield* TokenStates;
    const held = (yield* store.heldBackReleases(chain.id, at)).filter(
      (c) => c.code === "payout_address_blocked",
    );
    const cleared: string[] = [];
    for (const token of new Set(held.map((c) => c.token_address))) {
      const ofToken = held.filter((c) => c.token_address === token);
      const listed = yield* states.blacklisted(
        chain,
        token,
        ofToken.map((c) => c.payee_address),
      );
      cleared.push(...ofToken.filter((c) => !listed.has(c.payee_address)).map((c) => c.id));
    }
    yield* store.retryReleasesAt(cleared, at);
  }).pipe(Effect.catchTag("ChainUnavailable", () => Effect.void));

/** One chain's due releases, in one transaction; returns how many charges were submitted. */
const releaseChain = (chain: ResolvedChain, now: number, sender: Hex, operators: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const store = yield* ChargeStore;
    const states = yield* TokenStates;
    const registry = yield* ChainRegistry;
    const outbox = yield* Outbox;
    const atMs = yield* Clock.currentTimeMillis;
    const at = new Date(atMs);
    yield* retryCleared(chain, at);
    const paused = yield* states.pausedTokens(chain.id);
    // Merchants whose share of the relayer's budget is spent: their releases wait (relayer-shares.ts).
    const skipped = yield* (yield* Relayer).skippedMerchants(chain.id);
    return yield* sql.withTransaction(
      Effect.gen(function* () {
        const due = [
          ...(yield* store.lockReleasable(chain.id, now, operators, RELEASE_BATCH, at, paused, skipped)),
        ].sort(byPayout);
        if (due.length === 0) return 0;
        const isolated = yield* isolateFailures(chain, sender, due, releaseCall);
        const pausedNow = new Set<string>();
        for (const { item, revert } of isolated.failing) {
          const verdict = yield* explainTransfer(chain, item.token_address, revert, {
            payee: item.payee_address,
          });
          if (verdict.kind === "paused") pausedNow.add(item.token_address);
          if (verdict.kind !== "failed") continue;
          const since = item.release_failed_since ?? at;
          yield* store.recordReleaseFailed(
            item.id,
            verdict.failure,
            since,
            new Date(nextAttemptAt(since.getTime(), atMs)),
          );
          yield* Effect.logWarning("release refused; held back").pipe(
            Effect.annotateLogs({ chain: chain.id, charge: item.id, code: verdict.failure.code }),
          );
          if (item.release_failed_since !== null) continue;
          const charge = yield* store.reload(item.id);
          yield* outbox.raise({
            merchantId: charge.merchant_id,
            livemode: charge.livemode,
            type: "charge.release_failed",
            object: toChargeObject(charge, registry.byId(charge.chain_id)),
            key: `${charge.id}:release_failed:${since.getTime()}`,
          });
        }
        const sending = isolated.passing.filter((c) => !pausedNow.has(c.token_address));
        if (sending.length === 0) return 0;
        // A fresh purpose per attempt: a release that reverted is cleared and tried again.
        const purpose = `release:${chain.id}:${yield* newId("request")}`;
        const submitted = yield* submitPassing(
          chain,
          isolated,
          sending,
          releaseCall,
          purpose,
          "releases",
          (c) => c.merchant_id,
        );
        for (const charge of submitted) yield* store.startAction(charge.id, "release", purpose);
        yield* (yield* GasCosts).carries(
          chain.id,
          purpose,
          "release",
          "charge",
          submitted.map((c) => c.id),
        );
        return submitted.length;
      }),
    );
  });

/** Submits the releases due on every chain with escrow; returns how many charges were submitted. */
export const releaseDueHolds = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const heads = yield* ChainHeads;
  const relayer = yield* Relayer;
  let submitted = 0;
  for (const chain of registry.all) {
    const sender = relayer.address(chain.id);
    const operator = relayer.operator(chain);
    if (!chain.escrow_available || sender === undefined || operator === undefined) continue;
    const now = yield* heads.latestTime(chain).pipe(Effect.option);
    if (now._tag === "None") continue;
    const operators = [...new Set([operator.toLowerCase(), sender.toLowerCase()])];
    submitted += yield* releaseChain(chain, now.value, sender, operators).pipe(
      Effect.catchTag("ChainUnavailable", (error) =>
        Effect.as(
          Effect.logWarning("releases not simulated; will retry").pipe(
            Effect.annotateLogs({ chain: chain.id, reason: error.message }),
          ),
          0,
        ),
      ),
    );
  }
  return submitted;
});

export const holdReleaser: Worker<
  | SqlClient.SqlClient
  | ChainRegistry
  | ChainClients
  | ChainHeads
  | Relayer
  | ChargeStore
  | TokenStates
  | Outbox
  | GasCosts
> = {
  name: "hold-releaser",
  pass: Effect.asVoid(releaseDueHolds),
  interval: "1 second",
};
