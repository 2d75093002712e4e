/**
 * The billing worker: invoices each subscription at each period boundary of its mandate (chain time, so
 * the test clock moves it), charges the invoice, and follows the charge to `invoice.paid` or into
 * dunning. A round runs eight steps per chain, each in its own module; every step handles its rows in
 * batches under row locks (round.ts), and an invoice is unique per subscription and period, so several
 * processes billing at once, or a restart mid-pass, never invoice a period twice.
 */
import { Effect, Option } from "effect";
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
import { makeRound } from "./round.ts";
import { settleCharged } from "./settle-charged.ts";
import { settleReturned } from "./settle-returned.ts";

/** Rounds a pass runs per chain while steps come back full (a boundary can make thousands due at once). */
const MAX_ROUNDS = 10;

/** One chain's billing at chain time `now`; true when a step had more work than one batch. */
export const billChain = (chain: ResolvedChain, now: number) =>
  Effect.gen(function* () {
    const round = yield* makeRound(chain, now);
    const full = [
      yield* settleCharged(round),
      yield* settleReturned(round),
      yield* activateAuthorized(round),
      yield* lapseUnpaid(round),
      yield* lifecycle(round),
      yield* billBoundaries(round),
      yield* retryDunning(round),
      yield* advanceWarnings(round),
    ];
    return full.some(Boolean);
  });

export const billingPass = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const heads = yield* ChainHeads;
  for (const chain of registry.all) {
    const now = yield* heads.latestTime(chain).pipe(Effect.option);
    if (Option.isNone(now)) continue;
    for (let round = 0; round < MAX_ROUNDS; round++) if (!(yield* billChain(chain, now.value))) break;
  }
});

export const subscriptionBilling: Worker<Effect.Services<typeof billingPass>> = {
  name: "subscription-billing",
  pass: billingPass,
  interval: "1 second",
  // Chain facts (a charge succeeding) arrive as events; settle their invoices at once. Each indexed
  // block may carry the chain's time past a period boundary: bill it then, not up to an interval later.
  wakeOn: [EVENTS_CHANNEL, `${ONCHAIN_SCHEMA}_live_query`],
};
