/**
 * The relayer's submission locks (RelayerStore.holdSubmission, holdItems): a lone submission and a group
 * that share a purpose and an action wait for each other, whichever comes first, instead of deadlocking.
 * Before, the lone submission took its purpose's lock before its action's and a group took them in their
 * keys' text order (the action first): queued behind a third holder of the purpose, the two deadlocked,
 * and Postgres failed one of them after `deadlock_timeout`.
 */

import { Deferred, Effect, Fiber } from "effect";
import { SqlClient } from "effect/sql";
import { afterAll, beforeAll, expect, it } from "vitest";
import { RelayerStore } from "../../service/chains/relayer-store.ts";
import { lockWaits, type RelayerStoreRuntime, relayerStoreRuntime } from "./harness.ts";

const CHAIN_ID = 31337;
const FROM = "0x0000000000000000000000000000000000000e1a";

let runtime: RelayerStoreRuntime;

beforeAll(async () => {
  runtime = await relayerStoreRuntime("relayer_locks", 6);
});
afterAll(async () => {
  await runtime?.dispose();
});

it.each([
  ["a lone submission, then a group", "lone first"],
  ["a group, then a lone submission", "group first"],
] as const)("%s, both queued behind a holder of their purpose, both go through", async (_, order) => {
  const action = `authorize:mnd_lock_${order.replace(" ", "_")}`;
  const purpose = `${action}:req_1`;
  const outcome = await runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const store = yield* RelayerStore;
      const holding = yield* Deferred.make<void>();
      const release = yield* Deferred.make<void>();
      const holder = yield* Effect.forkChild(
        sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`relayer-purpose:${CHAIN_ID}:${purpose}`}))`;
            yield* Deferred.succeed(holding, undefined);
            yield* Deferred.await(release);
          }),
        ),
      );
      yield* Deferred.await(holding);
      const lone = sql.withTransaction(store.holdSubmission(CHAIN_ID, FROM, purpose, action));
      const group = sql.withTransaction(store.holdItems(CHAIN_ID, FROM, [{ purpose, action }]));
      const [first, second] = order === "lone first" ? [lone, group] : [group, lone];
      const firstFiber = yield* Effect.forkChild(Effect.result(first));
      yield* lockWaits(1, "advisory");
      const secondFiber = yield* Effect.forkChild(Effect.result(second));
      yield* lockWaits(2, "advisory");
      yield* Deferred.succeed(release, undefined);
      yield* Fiber.join(holder);
      return [yield* Fiber.join(firstFiber), yield* Fiber.join(secondFiber)];
    }),
  );
  expect(outcome.map((result) => result._tag)).toEqual(["Success", "Success"]);
});
