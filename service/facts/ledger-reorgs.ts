/**
 * Movements a reorganisation took back. The relay records a fact's movement once the fact is
 * `confirmations` deep; with few confirmations a deeper reorg can still remove the fact, or mine it
 * again in another block (its key names the outcome, so it keeps its key). Each pass compares the
 * ledger's movements in the last REORG_WINDOW blocks up to the confirmed block with the indexer's
 * facts (one fact per block first: a block whose sample still has its hash was not reorganised), and
 * for each that differs:
 * - gone from the chain: a reversal takes it back (balances/balance-store.ts);
 * - mined again in another block: a reversal, then the movement again at its new place;
 * - reversed earlier and on the chain again: the movement again.
 * The indexer's head is read before and after the facts, and a pass that saw it move decides nothing,
 * as payment-reorgs.ts does; the changes are made under the chain's relay lock, so the relay never
 * records a fact while its old movement is being taken back.
 */
import { PgClient } from "@effect/sql-pg";
import { Effect } from "effect";
import type { SqlClient } from "effect/sql";
import { BalanceStore } from "../balances/balance-store.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { ONCHAIN_SCHEMA } from "../db/client.ts";
import { headOf } from "../payments/onchain-payments.ts";
import { REORG_WINDOW } from "../payments/payment-reorgs.ts";
import type { Worker } from "../workers/worker.ts";
import { FactReader } from "./fact-reader.ts";
import { lockChain } from "./fact-relay.ts";
import { recordMovements } from "./ledger-facts.ts";

const checkChain = (chain: ResolvedChain) =>
  Effect.gen(function* () {
    const sql = yield* PgClient.PgClient;
    const ledger = yield* BalanceStore;
    const reader = yield* FactReader;
    const before = yield* headOf(chain.id);
    if (before === undefined) return;
    const confirmed = before.number - BigInt(chain.confirmations);
    const from = confirmed - REORG_WINDOW;
    // A fact of each block first: only the blocks whose sample moved are looked at fact by fact.
    const blocks = yield* ledger.blocksOf(chain.id, from, confirmed);
    const sampled = new Map(
      (yield* reader.byKeys(
        blocks.map((block) => block.fact_key),
        confirmed,
      )).map((fact) => [fact.key, fact.block_hash] as const),
    );
    const reorganised = blocks
      .filter((block) => sampled.get(block.fact_key) !== block.block_hash)
      .map((block) => block.block_number);
    const recent = yield* ledger.recentOf(chain.id, from, confirmed, reorganised);
    if (recent.length === 0) return;
    const onChain = new Map(
      (yield* reader.byKeys(
        recent.map((row) => row.fact_key),
        confirmed,
      )).map((fact) => [fact.key, fact] as const),
    );
    const after = yield* headOf(chain.id);
    if (after?.number !== before.number || after.hash !== before.hash) return;
    const changed = recent.flatMap((row) => {
      const fact = onChain.get(row.fact_key);
      if (row.standing ? fact?.block_hash === row.block_hash : fact === undefined) return [];
      return [{ row, fact }];
    });
    if (changed.length === 0) return;
    yield* sql.withTransaction(
      Effect.gen(function* () {
        if (!(yield* lockChain(chain.id))) return;
        const reversed = yield* ledger.reverse(
          changed.filter(({ row }) => row.standing).map(({ row }) => row.id),
          before.timestamp,
        );
        const recorded = yield* recordMovements(
          chain,
          changed.flatMap(({ row, fact }) =>
            fact === undefined ? [] : [{ fact, merchantId: row.merchant_id }],
          ),
        );
        yield* Effect.logWarning("a reorg changed movements of the ledger").pipe(
          Effect.annotateLogs({ chain: chain.id, reversed: reversed.length, recorded_again: recorded }),
        );
      }),
    );
  });

export const checkLedgerReorgs = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  yield* Effect.forEach(registry.all, checkChain, { concurrency: "unbounded", discard: true });
});

export const ledgerReorgs: Worker<
  PgClient.PgClient | SqlClient.SqlClient | ChainRegistry | BalanceStore | FactReader
> = {
  name: "ledger-reorgs",
  pass: checkLedgerReorgs,
  interval: "1 second",
  wakeOn: `${ONCHAIN_SCHEMA}_live_query`,
};
