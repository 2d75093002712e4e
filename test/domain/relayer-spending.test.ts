/**
 * The relayer's hourly budget reads running totals per account and minute (billing.relayer_spending),
 * kept by the statements that write the transactions. Property: after any sequence of inserts,
 * receipts, supersessions and replacements, at any times and on any of the pool's connections, the
 * budget's figure for a window equals the sum of every transaction's cost (gas limit × max fee while
 * pending, gas used × price once mined, nothing once superseded) over the transactions last signed
 * (created, or replaced: a replacement moves the whole cost to its own minute) since the start of the
 * window's first minute: never less than the exact hour's spending. The same for each merchant's part
 * (chains/relayer-shares.ts): its objects' fraction of each cost, rounded down.
 */

import { Clock, Effect } from "effect";
import { SqlClient } from "effect/sql";
import fc from "fast-check";
import type { Hex } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { merchantWeights, partOf } from "../../service/chains/relayer-shares.ts";
import { startOfMinute } from "../../service/chains/relayer-spending.ts";
import { RelayerStore } from "../../service/chains/relayer-store.ts";
import { type RelayerStoreRuntime, relayerStoreRuntime } from "./harness.ts";

const FROM = "0x0000000000000000000000000000000000000e1a";
const T0 = Date.UTC(2026, 10, 26, 9, 0, 0);

type Services = RelayerStore | SqlClient.SqlClient;
let runtime: RelayerStoreRuntime;
const run = <A, E>(effect: Effect.Effect<A, E, Services>) => runtime.runPromise(effect);

beforeAll(async () => {
  runtime = await relayerStoreRuntime("relayer_spending", 4);
});
afterAll(async () => {
  await runtime?.dispose();
});

/** Runs `effect` with the Clock's wall time at `millis` (monotonic time and sleeping as they are). */
const at = <A, E, R>(millis: number, effect: Effect.Effect<A, E, R>) =>
  Effect.flatMap(Clock.Clock, (clock) =>
    Effect.provideService(effect, Clock.Clock, {
      currentTimeMillisUnsafe: () => millis,
      currentTimeMillis: Effect.succeed(millis),
      currentTimeNanosUnsafe: () => BigInt(millis) * 1_000_000n,
      currentTimeNanos: Effect.succeed(BigInt(millis) * 1_000_000n),
      monotonicTimeNanosUnsafe: () => clock.monotonicTimeNanosUnsafe(),
      monotonicTimeNanos: clock.monotonicTimeNanos,
      sleep: (duration) => clock.sleep(duration),
    }),
  );

const MERCHANTS = ["mer_one", "mer_two", "mer_three"] as const;

type Op =
  | {
      readonly kind: "insert";
      readonly offsetMs: number;
      readonly gasLimit: bigint;
      readonly maxFee: bigint;
      /** The merchant of each object carried (none: a transaction serving no merchant). */
      readonly merchants: ReadonlyArray<string>;
    }
  | { readonly kind: "receipt"; readonly pick: number; readonly spent: bigint }
  | { readonly kind: "superseded"; readonly pick: number }
  | { readonly kind: "replaced"; readonly pick: number; readonly offsetMs: number; readonly maxFee: bigint };

const op: fc.Arbitrary<Op> = fc.oneof(
  fc.record({
    kind: fc.constant("insert" as const),
    offsetMs: fc.integer({ min: 0, max: 3 * 3_600_000 }),
    gasLimit: fc.bigInt({ min: 21_000n, max: 30_000_000n }),
    maxFee: fc.bigInt({ min: 1n, max: 10n ** 12n }),
    merchants: fc.array(fc.constantFrom(...MERCHANTS), { maxLength: 7 }),
  }),
  fc.record({
    kind: fc.constant("receipt" as const),
    pick: fc.nat(),
    spent: fc.bigInt({ min: 0n, max: 10n ** 18n }),
  }),
  fc.record({ kind: fc.constant("superseded" as const), pick: fc.nat() }),
  fc.record({
    kind: fc.constant("replaced" as const),
    pick: fc.nat(),
    offsetMs: fc.integer({ min: 0, max: 3 * 3_600_000 }),
    maxFee: fc.bigInt({ min: 1n, max: 10n ** 12n }),
  }),
);

/** The sum the totals must equal, straight from the transactions. */
const directSum = (chainId: number, since: Date) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql<{ value: string }>`SELECT coalesce(sum(coalesce(spent_wei,
        CASE WHEN status = 'superseded' THEN 0 ELSE gas_limit * max_fee_per_gas END)), 0)::text AS value
      FROM billing.relayer_transactions
      WHERE chain_id = ${chainId} AND coalesce(signed_at, created_at) >= ${since}`,
  ).pipe(Effect.map((rows) => BigInt(rows[0]?.value ?? "0")));

/** A merchant's parts straight from the transactions (each cost now, as directSum), computed here. */
const directParts = (chainId: number, merchant: string, since: Date) =>
  Effect.flatMap(
    SqlClient.SqlClient,
    (sql) => sql<{ cost: string; merchant_ids: string[] | null; merchant_objects: number[] | null }>`
      SELECT coalesce(spent_wei, CASE WHEN status = 'superseded' THEN 0 ELSE gas_limit * max_fee_per_gas END)::text
          AS cost, merchant_ids, merchant_objects
        FROM billing.relayer_transactions
        WHERE chain_id = ${chainId} AND coalesce(signed_at, created_at) >= ${since}`,
  ).pipe(
    Effect.map((rows) =>
      rows.reduce((sum, row) => {
        const ids = row.merchant_ids ?? [];
        const objects = (row.merchant_objects ?? []).map(Number);
        const all = objects.reduce((a, b) => a + b, 0);
        const i = ids.indexOf(merchant);
        return i < 0 ? sum : sum + partOf(BigInt(row.cost), objects[i] ?? 0, all);
      }, 0n),
    ),
  );

let chains = 40_000;

describe("the relayer's budget totals", () => {
  it("equal the transactions' costs (and each merchant's parts) since the window's first minute, whatever happened to them", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(op, { minLength: 1, maxLength: 25 }),
        fc.array(fc.integer({ min: 0, max: 4 * 3_600_000 }), { minLength: 1, maxLength: 4 }),
        async (ops, windowEnds) => {
          const chainId = ++chains;
          const ids: string[] = [];
          for (const [n, step] of ops.entries()) {
            const id = ids.length === 0 ? undefined : ids[("pick" in step ? step.pick : 0) % ids.length];
            switch (step.kind) {
              case "insert": {
                const row = await run(
                  at(
                    T0 + step.offsetMs,
                    Effect.flatMap(RelayerStore, (store) =>
                      store.insert({
                        chainId,
                        from: FROM,
                        nonce: n,
                        to: FROM as Hex,
                        data: "0x",
                        gasLimit: step.gasLimit,
                        maxFeePerGas: step.maxFee,
                        maxPriorityFeePerGas: 1n,
                        hash: `0x${n.toString(16).padStart(64, "0")}` as Hex,
                        raw: "0x",
                        purpose: `spending:${chainId}:${n}`,
                        action: null,
                        heldForFees: false,
                        merchants: merchantWeights(step.merchants),
                      }),
                    ),
                  ),
                );
                ids.push(row.id);
                break;
              }
              case "receipt":
                if (id !== undefined)
                  await run(
                    Effect.flatMap(RelayerStore, (store) =>
                      store.recordReceipt(id, {
                        status: "mined",
                        blockNumber: 1n,
                        hash: "0x01",
                        spentWei: step.spent,
                        l1FeeWei: undefined,
                        skipped: [],
                      }),
                    ),
                  );
                break;
              case "superseded":
                if (id !== undefined)
                  await run(Effect.flatMap(RelayerStore, (store) => store.recordSuperseded(id)));
                break;
              case "replaced":
                if (id !== undefined)
                  await run(
                    at(
                      T0 + step.offsetMs,
                      Effect.flatMap(RelayerStore, (store) =>
                        store.recordReplacement(id, {
                          raw: "0x02",
                          hash: "0x02",
                          maxFeePerGas: step.maxFee,
                          maxPriorityFeePerGas: 1n,
                        }),
                      ),
                    ),
                  );
                break;
            }
          }
          for (const end of windowEnds) {
            const since = new Date(T0 + end - 3_600_000);
            const spent = await run(
              Effect.flatMap(RelayerStore, (store) => store.spentSince(chainId, FROM, since)),
            );
            expect(spent).toBe(await run(directSum(chainId, startOfMinute(since))));
            expect(spent).toBeGreaterThanOrEqual(
              await run(directSum(chainId, new Date(since.getTime() + 1))),
            );
            const parts = await run(
              Effect.flatMap(RelayerStore, (store) =>
                store.merchantSpentSince(chainId, FROM, [...MERCHANTS], since),
              ),
            );
            for (const merchant of MERCHANTS)
              expect(
                parts.filter((row) => row.merchant_id === merchant).reduce((sum, row) => sum + row.wei, 0n),
              ).toBe(await run(directParts(chainId, merchant, startOfMinute(since))));
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
