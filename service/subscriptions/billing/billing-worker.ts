/**
 * The billing worker: invoices each subscription at each period boundary of its mandate (chain time, so
 * the test clock moves it), charges the invoice, and follows the charge to `invoice.paid` or into
 * dunning. A round runs eight steps per chain, each in its own module; every step handles its rows in
 * batches under row locks (round.ts), and an invoice is unique per subscription and period, so several
 * processes billing at once, or a restart mid-pass, never invoice a period twice.
 */
import { Effect, Option } from "effect";
import type { SqlError } from "effect/sql";
import { ChainHeads } from "../../chains/chain-heads.ts";
import type { ResolvedChain } from "../../chains/config.ts";
import { ChainRegistry } from "../../chains/registry.ts";
import { ONCHAIN_SCHEMA } from "../../db/client.ts";
import { EVENTS_CHANNEL } from "../../events/outbox.ts";
import type { Worker } from "../../workers/worker.ts";
import { activateAuthorized } from "./activate-authorized.ts";
import { advanceWarnings } from "./advance-warnings.ts";
import { billBoundaries } from "./bill-boundaries.ts";
import { lapseUnpaid } from "./lapse-unpaid.ts";
import { lifecycle } from "./lifecycle.ts";
import { retryDunning } from "./retry-dunning.ts";
import { type BillingRound, makeRound } from "./round.ts";
import { settleCharged } from "./settle-charged.ts";
import { settleReturned } from "./settle-returned.ts";

/** Rounds a pass runs per chain while steps come back full (a boundary can make thousands due at once). */
const MAX_ROUNDS = 10;

/** The round's settling steps: invoices whose charge reached an outcome; true when one was full. */
const settle = (round: BillingRound) =>
  Effect.map(Effect.all([settleCharged(round), settleReturned(round)]), (full) => full.some(Boolean));

/** One chain's billing at chain time `now`; true when a step had more work than one batch. */
export const billChain = (chain: ResolvedChain, now: number) =>
  Effect.gen(function* () {
    const round = yield* makeRound(chain, now);
    // Settled first, so that nothing after it lapses or retries an invoice its charge has paid.
    const full = [
      yield* settle(round),
      yield* activateAuthorized(round),
      yield* lapseUnpaid(round),
      yield* lifecycle(round),
      yield* billBoundaries(round),
      yield* retryDunning(round),
      yield* advanceWarnings(round),
    ];
    return full.some(Boolean);
  });

/** Runs `step` on every chain at its time, again while it had more than a batch, up to MAX_ROUNDS. */
const everyChain = <R>(
  step: (chain: ResolvedChain, now: number) => Effect.Effect<boolean, SqlError.SqlError, R>,
) =>
  Effect.gen(function* () {
    const registry = yield* ChainRegistry;
    const heads = yield* ChainHeads;
    for (const chain of registry.all) {
      const now = yield* heads.latestTime(chain).pipe(Effect.option);
      if (Option.isNone(now)) continue;
      for (let round = 0; round < MAX_ROUNDS; round++) if (!(yield* step(chain, now.value))) break;
    }
  });

export const billingPass = everyChain(billChain);

/** One chain's settling steps alone (the settlement worker's). */
export const settleChain = (chain: ResolvedChain, now: number) =>
  Effect.flatMap(makeRound(chain, now), settle);

export const subscriptionBilling: Worker<Effect.Services<typeof billingPass>> = {
  name: "subscription-billing",
  pass: billingPass,
  interval: "1 second",
  // Chain facts (a mandate authorised, a charge's outcome) arrive as events: act on them at once. Each
  // indexed block may carry the chain's time past a period boundary: bill it then, not up to an interval
  // later.
  wakeOn: [EVENTS_CHANNEL, `${ONCHAIN_SCHEMA}_live_query`],
};

/**
 * The settling steps on their own, woken by every new event (a charge's outcome is one): the billing
 * pass runs them first too, but it runs eight steps a round and up to ten rounds, and while it was busy
 * with a boundary or another merchant's work an `invoice.paid` waited for its end (0.3–1.8 s in the
 * hostile-merchant test, issue 47). Settling in the relay's transaction instead (tried) made every
 * relay batch of a boundary longer, and the boundary 9 % slower (bench:billing). Both passes take rows
 * under SKIP LOCKED, so neither settles an invoice the other is settling.
 */
export const invoiceSettlement: Worker<Effect.Services<typeof billingPass>> = {
  name: "invoice-settlement",
  pass: everyChain(settleChain),
  interval: "1 second",
  wakeOn: EVENTS_CHANNEL,
};
