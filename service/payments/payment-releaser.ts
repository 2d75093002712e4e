/**
 * The payment releaser: pays held payment funds to the merchant once their hold is over (the service
 * pays the gas), up to RELEASE_BATCH payments per `releasePayments` transaction. A payment of the batch
 * that someone else released first (anyone may) is passed over by the contract: the batch mines with the
 * others, and that payment's pending action is cleared by the other transaction's `PaymentReleased`
 * fact, which leaves nothing held (PaymentStore.recordHold). A batch the chain would still refuse is
 * split until the refused payments stand alone (chains/batch-isolation.ts): the rest is released in the
 * same pass, and one the token refuses (its payout address blacklisted) is held back
 * (held-back-transfers.ts) with its funds in escrow. Nothing is sent for a token its issuer has paused.
 * Rows are locked and marked in the transaction that records the relayer's transaction; a release that
 * reverted is cleared and tried again.
 */
import { Clock, Effect } from "effect";
import { SqlClient } from "effect/sql";
import type { Hex } from "viem";
import { isolateFailures, submitPassing } from "../chains/batch-isolation.ts";
import { explainTransfer } from "../chains/blocked-transfers.ts";
import type { ChainClients } from "../chains/chain-clients.ts";
import { ChainHeads } from "../chains/chain-heads.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { GasCosts } from "../chains/gas-costs.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { TokenStates } from "../chains/token-states.ts";
import type { Outbox } from "../events/outbox.ts";
import { newId } from "../ids.ts";
import type { Worker } from "../workers/worker.ts";
import { depositTermsOf } from "./deposit-terms.ts";
import { holdBack, retryCleared } from "./held-back-transfers.ts";
import type { PaymentRow } from "./payment-object.ts";
import type { PaymentRender } from "./payment-render.ts";
import { PaymentStore } from "./payment-store.ts";

const RELEASE_BATCH = 50;

const releaseCall = (rows: ReadonlyArray<PaymentRow>) => ({
  functionName: "releasePayments" as const,
  args: [rows.map(depositTermsOf)],
});

const releaseChain = (chain: ResolvedChain, now: number, at: Date, from: Hex) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const store = yield* PaymentStore;
    const states = yield* TokenStates;
    const paused = yield* states.pausedTokens(chain.id);
    // Merchants whose share of the relayer's budget is spent: their releases wait (relayer-shares.ts).
    const skipped = yield* (yield* Relayer).skippedMerchants(chain.id);
    yield* sql.withTransaction(
      Effect.gen(function* () {
        const due = yield* store.lockReleasable(chain.id, now, RELEASE_BATCH, at, paused, skipped);
        if (due.length === 0) return;
        const isolated = yield* isolateFailures(chain, from, due, releaseCall);
        const pausedNow = new Set<string>();
        for (const { item, revert } of isolated.failing) {
          const verdict = yield* explainTransfer(chain, item.token_address, revert, {
            payee: item.payee_address,
          });
          if (verdict.kind === "paused") pausedNow.add(item.token_address.toLowerCase());
          if (verdict.kind === "failed") yield* holdBack(item, "release", verdict.failure, at);
        }
        const sending = isolated.passing.filter((row) => !pausedNow.has(row.token_address.toLowerCase()));
        if (sending.length === 0) return;
        const purpose = `payment-release:${chain.id}:${yield* newId("request")}`;
        const sent = yield* submitPassing(
          chain,
          isolated,
          sending,
          releaseCall,
          purpose,
          "payment release",
          (row) => row.merchant_id,
        );
        for (const row of sent) yield* store.startAction(row.id, "release", purpose, null);
        yield* (yield* GasCosts).carries(
          chain.id,
          purpose,
          "payment_release",
          "payment",
          sent.map((row) => row.id),
        );
      }),
    );
  });

export const releasePaymentHolds = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const heads = yield* ChainHeads;
  const relayer = yield* Relayer;
  const store = yield* PaymentStore;
  yield* store.clearRevertedActions;
  yield* Effect.forEach(
    registry.all.filter((chain) => chain.escrow_available),
    (chain) =>
      Effect.gen(function* () {
        const from = relayer.address(chain.id);
        if (from === undefined) return;
        const at = new Date(yield* Clock.currentTimeMillis);
        yield* retryCleared(chain, "release", at);
        if (!(yield* store.workOn(chain.id, at)).held) return;
        const now = yield* heads.latestTime(chain);
        yield* releaseChain(chain, now, at, from);
      }).pipe(
        Effect.catchTag("ChainUnavailable", (error) =>
          Effect.logWarning("payment releaser could not read the chain").pipe(
            Effect.annotateLogs({ chain: chain.id, reason: error.message }),
          ),
        ),
      ),
    { concurrency: "unbounded", discard: true },
  );
});

export const paymentReleaser: Worker<
  | SqlClient.SqlClient
  | ChainRegistry
  | ChainClients
  | ChainHeads
  | Relayer
  | PaymentStore
  | TokenStates
  | PaymentRender
  | Outbox
  | GasCosts
> = {
  name: "payment-releaser",
  pass: releasePaymentHolds,
  interval: "1 second",
};
