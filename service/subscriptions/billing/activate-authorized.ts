/**
 * Step 2 of a billing round: subscriptions whose customer has authorised become active, and their
 * current period is due at once; one whose mandate was revoked meanwhile ends.
 */
import { Effect } from "effect";
import { SubscriptionStore } from "../subscription-store.ts";
import { Subscriptions } from "../subscriptions.ts";
import { BATCH, type BillingRound, inTransactions } from "./round.ts";

export const activateAuthorized = (round: BillingRound) =>
  Effect.gen(function* () {
    const store = yield* SubscriptionStore;
    const subscriptions = yield* Subscriptions;
    const ids = yield* store.authorised(round.chain.id, BATCH);
    // A batch's rows are locked and activated with one statement each; a revoked mandate's ends alone.
    yield* inTransactions(ids, (batch) =>
      Effect.gen(function* () {
        const rows = yield* store.lock(batch, { kind: "incomplete" });
        for (const row of rows)
          if (row.mandate_status === "revoked") yield* subscriptions.end(row.id, "mandate_revoked");
        yield* store.activate(
          rows.filter((row) => row.mandate_status !== "revoked").map((row) => row.id),
          round.now,
        );
      }),
    );
    return ids.length === BATCH;
  });
