/**
 * The ledger of a deployment that relayed facts before it had one: each chain's money facts up to the
 * relay's cursor are replayed into the merchants' ledgers once, in chain order, a batch per
 * transaction under the chain's relay lock. Only facts the relay applied count: a charge fact whose
 * event the outbox has, a payment fact standing on its payment. The relay records everything after its
 * cursor itself, and a fact recorded twice stands once (balances/balance-store.ts), so the two never
 * need to agree on where one ends. A chain with no cursor yet has nothing to replay.
 */
import { PgClient } from "@effect/sql-pg";
import { Effect } from "effect";
import type { SqlClient } from "effect/sql";
import { BalanceStore, MONEY_FACT_KINDS } from "../balances/balance-store.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { PaymentStore } from "../payments/payment-store.ts";
import type { Worker } from "../workers/worker.ts";
import { FactReader, READ_BATCH } from "./fact-reader.ts";
import { lockChain } from "./fact-relay.ts";
import { recordMovements } from "./ledger-facts.ts";
import { RelayStore } from "./relay-store.ts";

/** One batch of the chain's replay; true when there may be more. */
const backfillBatch = (chain: ResolvedChain) =>
  Effect.gen(function* () {
    const ledger = yield* BalanceStore;
    const relay = yield* RelayStore;
    const reader = yield* FactReader;
    const payments = yield* PaymentStore;
    const backfill = yield* ledger.backfillOf(chain.id);
    if (backfill.done || !(yield* lockChain(chain.id))) return false;
    const cursor = (yield* relay.loadAnchors(chain.id)).at(-1);
    if (cursor === undefined) return yield* Effect.as(ledger.backfillRead(chain.id, null, true), false);
    const read = yield* reader.ofKindsThrough(chain.id, MONEY_FACT_KINDS, cursor, backfill.position);
    const paymentKeys = read.filter((fact) => fact.kind.startsWith("payment.")).map((fact) => fact.key);
    const standing = yield* payments.standingKeys(chain.id, paymentKeys);
    const recorded = yield* recordMovements(
      chain,
      read.flatMap((fact) => {
        const applied = fact.kind.startsWith("payment.") ? standing.has(fact.key) : fact.relayed;
        return applied && fact.owner !== null ? [{ fact, merchantId: fact.owner }] : [];
      }),
    );
    const last = read.at(-1);
    const done = read.length < READ_BATCH || last === undefined;
    yield* ledger.backfillRead(
      chain.id,
      last === undefined
        ? backfill.position
        : { block: last.block_number, logIndex: last.log_index, key: last.key },
      done,
    );
    if (recorded > 0 || done)
      yield* Effect.logInfo(done ? "ledger backfill done" : "ledger backfill recorded a batch").pipe(
        Effect.annotateLogs({ chain: chain.id, recorded }),
      );
    return !done;
  });

/** Batches a pass replays at most per chain, so a long history never makes the worker look stalled. */
const BATCHES_PER_PASS = 20;

const backfillChain = (chain: ResolvedChain) =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient;
    for (let batch = 0; batch < BATCHES_PER_PASS; batch++) {
      if (!(yield* sql.withTransaction(backfillBatch(chain)))) return;
      yield* Effect.yieldNow;
    }
  });

export const backfillLedgers = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  yield* Effect.forEach(registry.all, backfillChain, { concurrency: "unbounded", discard: true });
});

export const ledgerBackfill: Worker<
  | PgClient.PgClient
  | SqlClient.SqlClient
  | ChainRegistry
  | BalanceStore
  | RelayStore
  | FactReader
  | PaymentStore
> = {
  name: "ledger-backfill",
  pass: backfillLedgers,
  interval: "5 seconds",
};
