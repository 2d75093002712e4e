/**
 * Step 4 of a billing round, before the boundaries:
 * - pending updates (plan changes waiting for the customer's higher cap) applied once the mandate's cap
 *   in force covers them, or expired (plan-changes.ts);
 * - `subscription.trial_will_end` three days before a trial ends (once: the check's time is cleared in
 *   the transaction that raises it, and the event's key is the subscription's trial end);
 * - paused collection resumed at its `resumes_at`, before the boundary that time may bring is billed.
 * Each reads only the few subscriptions with something to do (partial indexes).
 */
import { Effect } from "effect";
import { Outbox } from "../../events/outbox.ts";
import { PlanChanges } from "../plan-changes.ts";
import { SubscriptionStore } from "../subscription-store.ts";
import { Subscriptions } from "../subscriptions.ts";
import { BATCH, type BillingRound, eachInTransaction } from "./round.ts";

const reconsiderPending = (round: BillingRound) =>
  Effect.gen(function* () {
    const store = yield* SubscriptionStore;
    const planChanges = yield* PlanChanges;
    const ids = yield* store.pendingChanges(round.chain.id, BATCH);
    yield* eachInTransaction(ids, (id) =>
      Effect.gen(function* () {
        const [row] = yield* store.lock([id], { kind: "pending_change" });
        if (row) yield* planChanges.reconsider(round.chain, row, round.now);
      }),
    );
    return ids.length === BATCH;
  });

const noticeTrialsEnding = (round: BillingRound) =>
  Effect.gen(function* () {
    const store = yield* SubscriptionStore;
    const subscriptions = yield* Subscriptions;
    const outbox = yield* Outbox;
    const ids = yield* store.trialNoticesDue(round.chain.id, round.now, BATCH);
    yield* eachInTransaction(ids, (id) =>
      Effect.gen(function* () {
        const [row] = yield* store.lock([id], { kind: "trial_notice", now: round.now });
        if (!row) return;
        yield* store.clearTrialNotice(id);
        // Late (the service was down, or the clock jumped past the trial's end): the first invoice says it.
        if (row.status !== "trialing" || row.trial_end === null || row.trial_end <= round.now) return;
        yield* outbox.raise({
          merchantId: row.merchant_id,
          livemode: row.livemode,
          type: "subscription.trial_will_end",
          object: subscriptions.render(row),
          key: `${id}:trial_will_end:${row.trial_end}`,
        });
      }),
    );
    return ids.length === BATCH;
  });

const resumeCollection = (round: BillingRound) =>
  Effect.gen(function* () {
    const store = yield* SubscriptionStore;
    const planChanges = yield* PlanChanges;
    const ids = yield* store.resumesDue(round.chain.id, round.now, BATCH);
    yield* eachInTransaction(ids, (id) =>
      Effect.gen(function* () {
        const [row] = yield* store.lock([id], { kind: "resume_due", now: round.now });
        if (row) yield* planChanges.resume(row, round.now);
      }),
    );
    return ids.length === BATCH;
  });

export const lifecycle = (round: BillingRound) =>
  Effect.gen(function* () {
    const full = [
      yield* resumeCollection(round),
      yield* reconsiderPending(round),
      yield* noticeTrialsEnding(round),
    ];
    return full.some(Boolean);
  });
