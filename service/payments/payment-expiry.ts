/**
 * Payment expiry: once a payment's `expires_at` has passed in its chain's time, it expires (nothing
 * received), becomes underpaid (`payment.underpaid`: part of it received), or stays paid. A payment
 * whose funds arrived before the deadline but are not confirmed yet waits for them up to
 * SETTLE_GRACE_SECONDS (the sweeper sweeps it at once), so a payer who paid in time is not reported
 * short because of the sweep's and the confirmations' delay. One whose sweep is held back (the token's
 * issuer blacklisted the payout or deposit address) or whose token is paused waits until it is swept:
 * the payer paid in time, and the funds wait at the address until the issuer lets them move.
 */
import { Clock, Effect } from "effect";
import { SqlClient } from "effect/sql";
import { ChainHeads } from "../chains/chain-heads.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { TokenStates } from "../chains/token-states.ts";
import { Outbox } from "../events/outbox.ts";
import type { Worker } from "../workers/worker.ts";
import { PaymentStore } from "./payment-store.ts";
import { PaymentTransitions } from "./payment-transitions.ts";

export const SETTLE_GRACE_SECONDS = 600;
const BATCH = 200;

const expireChain = (chain: ResolvedChain, now: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const store = yield* PaymentStore;
    const transitions = yield* PaymentTransitions;
    const outbox = yield* Outbox;
    return yield* sql.withTransaction(
      Effect.gen(function* () {
        const paused = yield* (yield* TokenStates).pausedTokens(chain.id);
        const due = yield* store.lockExpiring(chain.id, now, BATCH, paused);
        const waiting = due.filter(
          (row) => BigInt(row.seen) > 0n && now < row.expires_at + SETTLE_GRACE_SECONDS,
        );
        yield* store.markSweepDue(waiting.filter((row) => !row.sweep_due).map((row) => row.id));
        const expiring = due.filter((row) => !waiting.includes(row));
        for (const row of expiring) {
          const stepped = yield* transitions.step(row, { kind: "expire" }, { now });
          if (stepped.ok && stepped.event) yield* outbox.insert([stepped.event]);
        }
        return expiring.length;
      }),
    );
  });

export const expirePayments = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const heads = yield* ChainHeads;
  const store = yield* PaymentStore;
  yield* Effect.forEach(
    registry.all,
    (chain) =>
      Effect.gen(function* () {
        if (!(yield* store.workOn(chain.id, new Date(yield* Clock.currentTimeMillis))).open) return;
        const now = yield* heads.latestTime(chain);
        while ((yield* expireChain(chain, now)) >= BATCH) yield* Effect.yieldNow;
      }).pipe(
        Effect.catchTag("ChainUnavailable", (error) =>
          Effect.logWarning("payment expiry could not read the chain").pipe(
            Effect.annotateLogs({ chain: chain.id, reason: error.message }),
          ),
        ),
      ),
    { concurrency: "unbounded", discard: true },
  );
});

export const paymentExpiry: Worker<
  SqlClient.SqlClient | ChainRegistry | ChainHeads | PaymentStore | PaymentTransitions | Outbox | TokenStates
> = {
  name: "payment-expiry",
  pass: expirePayments,
  interval: "1 second",
};
