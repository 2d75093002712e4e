/**
 * The deposit sweeper: moves what arrived at deposit addresses to the merchants (or into their holds)
 * with the escrow's `sweep`, up to SWEEP_BATCH deposit addresses per transaction, paid by the relayer,
 * BATCHES_AT_ONCE transactions built at once so that deposits due together are swept in one block.
 * Which addresses are swept, and when, is the store's rule (`lockSweepable`): one sweep for a payment
 * paid in several transfers, none for dust before expiry, at most MAX_SWEEPS per payment, so someone
 * sending dust to a payment's address cannot make the relayer spend without end. A payment is locked
 * and marked in the transaction that records the relayer's transaction, so processes never sweep twice;
 * a sweep that reverted is due again.
 *
 * `sweep` is all-or-nothing: one deposit the token refuses (its payee's or its own address blacklisted)
 * would stop every sweep on the chain. A batch that would revert is split until the refused deposits
 * stand alone (chains/batch-isolation.ts); the rest is swept in the same pass, and the refused ones are
 * held back (held-back-transfers.ts) with their funds where they are. Nothing is sent for a token its
 * issuer has paused.
 *
 * The sweep's `PaymentReceived` is what makes a payment paid: Ponder indexes it from the escrow's own
 * address like every other escrow log, so chain truth stays in one indexed place (Ponder selects logs by
 * their emitting contract and cannot follow a token's transfers to a growing list of recipients). The
 * cost is this one batched transaction, paid by the service, and a block or two between a transfer and
 * its confirmation.
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
import { DEPOSITS_CHANNEL, PaymentStore } from "./payment-store.ts";

export const SWEEP_BATCH = 50;
export const MAX_SWEEPS = 10;
/** Transactions per chain and pass at most (a pass goes on while its batches come back full). */
const BATCHES_PER_PASS = 40;
/**
 * Batches built and sent at once (each locks its own deposits, skipping the others'): one after another,
 * ten batches took ~350 ms and the last missed the block the other nine made (bench:payments).
 */
const BATCHES_AT_ONCE = 4;

const merchantOf = (row: PaymentRow) => row.merchant_id;

const sweepCall = (rows: ReadonlyArray<PaymentRow>) => ({
  functionName: "sweep" as const,
  args: [rows.map(depositTermsOf)],
});

/** One batch of a chain's sweepable deposit addresses; returns how many were looked at. */
const sweepBatch = (chain: ResolvedChain, now: number, at: Date, from: Hex) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const store = yield* PaymentStore;
    const states = yield* TokenStates;
    const paused = yield* states.pausedTokens(chain.id);
    // Merchants whose share of the relayer's budget is spent: their deposits wait (relayer-shares.ts).
    const skipped = yield* (yield* Relayer).skippedMerchants(chain.id);
    return yield* sql.withTransaction(
      Effect.gen(function* () {
        const due = yield* store.lockSweepable(chain.id, now, MAX_SWEEPS, SWEEP_BATCH, at, paused, skipped);
        if (due.length === 0) return 0;
        const isolated = yield* isolateFailures(chain, from, due, sweepCall);
        const pausedNow = new Set<string>();
        for (const { item, revert } of isolated.failing) {
          const verdict = yield* explainTransfer(chain, item.token_address, revert, {
            payee: item.payee_address,
            deposit: item.deposit_address,
          });
          if (verdict.kind === "paused") pausedNow.add(item.token_address.toLowerCase());
          if (verdict.kind === "failed") yield* holdBack(item, "sweep", verdict.failure, at);
        }
        const sending = isolated.passing.filter((row) => !pausedNow.has(row.token_address.toLowerCase()));
        if (sending.length === 0) return due.length;
        const purpose = `sweep:${chain.id}:${yield* newId("request")}`;
        const sent = yield* submitPassing(chain, isolated, sending, sweepCall, purpose, "sweep", merchantOf);
        // Refused whole: the pass ends; merchants left out are skipped by the next batch's lock.
        if (sent.length === 0) return 0;
        yield* store.recordSwept(
          sent.map((row) => row.id),
          purpose,
        );
        yield* (yield* GasCosts).carries(
          chain.id,
          purpose,
          "sweep",
          "payment",
          sent.map((row) => row.id),
        );
        return due.length;
      }),
    );
  });

export const sweepDeposits = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const heads = yield* ChainHeads;
  const relayer = yield* Relayer;
  const store = yield* PaymentStore;
  yield* store.retryRevertedSweeps;
  yield* Effect.forEach(
    registry.all,
    (chain) =>
      Effect.gen(function* () {
        const from = relayer.address(chain.id);
        if (from === undefined) return;
        const at = new Date(yield* Clock.currentTimeMillis);
        yield* retryCleared(chain, "sweep", at);
        if (!(yield* store.workOn(chain.id, at)).sweep_due) return;
        const now = yield* heads.latestTime(chain);
        for (let sent = 0; sent < BATCHES_PER_PASS; sent += BATCHES_AT_ONCE) {
          const looked = yield* Effect.all(
            Array.from({ length: BATCHES_AT_ONCE }, () => sweepBatch(chain, now, at, from)),
            { concurrency: "unbounded" },
          );
          if (looked.some((n) => n < SWEEP_BATCH)) return;
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
  name: "deposit-sweeper",
  pass: sweepDeposits,
  interval: "500 millis",
  wakeOn: DEPOSITS_CHANNEL,
};
