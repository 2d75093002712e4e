/** Deletes idempotency records past their retention. Safe on every replica at once (a plain DELETE). */
import { Effect } from "effect";
import type { Worker } from "../workers/worker.ts";
import { Idempotency } from "./idempotency.ts";

export const idempotencyPurge: Worker<Idempotency> = {
  name: "idempotency-purge",
  pass: Effect.gen(function* () {
    const idempotency = yield* Idempotency;
    const deleted = yield* idempotency.purgeExpired;
    if (deleted > 0)
      yield* Effect.logInfo("purged expired idempotency records").pipe(Effect.annotateLogs({ deleted }));
  }),
  interval: "10 minutes",
};
