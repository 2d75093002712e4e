/**
 * Step 2 of a billing round: subscriptions whose customer has authorised become active, and their
 * current period is due at once; one whose mandate was revoked meanwhile ends.
 */
import { Effect } from "effect";
import { SubscriptionStore } from "../subscription-store.ts";
import { Subscriptions } from "../subscriptions.ts";
import { BATCH, type BillingRound, eachInTransaction } from "./round.ts";

export const activateAuthorized = (round: BillingRound) =>
  Effect.gen(function* () {
    const store = yield* SubscriptionStore;
    const subscriptions = yield* Subscriptions;
    const ids = yield* store.authorised(round.chain.id, BATCH);
    yield* eachInTransaction(ids, (id) =>
      Effect.gen(function* () {
        const [row] = yield* store.lock([id], { kind: "incomplete" });
        if (!row) return;
        if (row.mandate_status === "revoked") return yield* subscriptions.end(id, "mandate_revoked");
        yield* store.activate(id, round.now);
      }),
    );
    return ids.length === BATCH;
  });
