/**
 * The relayer's tracker: every second, each pending transaction on the process's chains (of every
 * account: a key rotated out still has its transactions seen to the end) gets a receipt recorded (its
 * cost: gas used × effective price, plus the L1 data fee where the receipt reports one, kept and split
 * over what it carried by gas-costs.ts in the same transaction), its bytes sent again if the node lost
 * them (once the base fee allows, for bytes held back by the fee ceiling), or (next in line and unmined
 * after `bumpAfter`) a replacement with the same nonce and fees raised by 12.5%, within the chain's
 * bounds: never above the fee ceiling, at most `gas.max_replacements` times, and only while the raised
 * fees fit the hourly budget; only the key's holder replaces its transactions. Nonces below our pending
 * transactions that nothing of ours will fill (the chain lost the blocks that had them) are filled
 * first. The decisions are pure (relayer-tracking.ts, relayer-fees.ts); this gathers their inputs and
 * applies them.
 */
import { Clock, Duration, Effect, Option } from "effect";
import { SqlClient } from "effect/sql";
import { type Hex, TransactionReceiptNotFoundError } from "viem";
import type { Worker } from "../workers/worker.ts";
import { skippedActions } from "./authorization-groups.ts";
import { ChainClients } from "./chain-clients.ts";
import type { ResolvedChain } from "./config.ts";
import { GasCosts } from "./gas-costs.ts";
import { ChainRegistry } from "./registry.ts";
import { RelayerAccount } from "./relayer-account.ts";
import { capFees, feeCeiling, mineableAt, RelayerFees } from "./relayer-fees.ts";
import { hold, rebroadcast, replace } from "./relayer-resend.ts";
import { RelayerStore, type TransactionRow } from "./relayer-store.ts";
import { decideTracking, l1FeeOf, nonceGaps } from "./relayer-tracking.ts";

type TrackerRequirements =
  | SqlClient.SqlClient
  | ChainRegistry
  | ChainClients
  | RelayerAccount
  | RelayerStore
  | RelayerFees
  | GasCosts;

const SUPERSEDED_RECHECK = Duration.seconds(1);

/**
 * The receipt of any hash ever broadcast for this transaction, with the items it carried that the
 * escrow skipped. `answered` is false when a lookup failed:
 * only viem's not-found error means "no receipt".
 */
const receiptOf = (row: TransactionRow) =>
  Effect.gen(function* () {
    const registry = yield* ChainRegistry;
    const clients = yield* ChainClients;
    const account = yield* RelayerAccount;
    const chain = registry.byId(row.chain_id);
    if (!chain) return { answered: false, found: undefined };
    const client = clients.client(chain);
    let answered = true;
    for (const hash of row.hashes) {
      const receipt = yield* account
        .rpc("receipt", () =>
          client.getTransactionReceipt({ hash: hash as Hex }).catch((error: unknown) => {
            if (error instanceof TransactionReceiptNotFoundError) return null;
            throw error;
          }),
        )
        .pipe(Effect.option);
      if (Option.isNone(receipt)) answered = false;
      else if (receipt.value !== null) {
        const { status, blockNumber, gasUsed, effectiveGasPrice, logs } = receipt.value;
        const l1FeeWei = l1FeeOf(receipt.value);
        const found = {
          status: status === "success" ? ("mined" as const) : ("reverted" as const),
          blockNumber,
          hash,
          spentWei: gasUsed * effectiveGasPrice + (l1FeeWei ?? 0n),
          gasUsed,
          effectiveGasPrice,
          l1FeeWei,
          // The items an authorizeMany carried that the escrow skipped: each is recorded as failed.
          skipped: skippedActions(chain.id, chain.escrow.address, logs),
        };
        return { answered: true, found };
      }
    }
    return { answered, found: undefined };
  });

type Found = NonNullable<Effect.Success<ReturnType<typeof receiptOf>>["found"]>;

/** The receipt and, beside it in the same transaction, the cost it accounts (gas-costs.ts). */
const recordFinal = (chain: ResolvedChain, row: TransactionRow, receipt: Found) =>
  Effect.gen(function* () {
    yield* (yield* RelayerStore).recordReceipt(row.id, receipt);
    yield* (yield* GasCosts).recordFinal(chain, row, receipt);
  });

const trackOne = (row: TransactionRow, bumpAfter: Duration.Input) =>
  Effect.gen(function* () {
    const registry = yield* ChainRegistry;
    const clients = yield* ChainClients;
    const account = yield* RelayerAccount;
    const store = yield* RelayerStore;
    const fees = yield* RelayerFees;
    const chain = registry.byId(row.chain_id);
    // The row's own account: a key rotated out still has its transactions tracked to the end.
    const address = row.from_address as Hex;
    if (!chain) return;
    const client = clients.client(chain);
    // The nonce is read before the receipts: a transaction of ours mined in between then shows its
    // receipt below instead of passing for one that another transaction superseded.
    const mined = yield* account
      .rpc("nonce", () => client.getTransactionCount({ address }))
      .pipe(Effect.option);
    const first = yield* receiptOf(row);
    if (first.found) return yield* recordFinal(chain, row, first.found);
    const newest = row.hashes[row.hashes.length - 1] as Hex;
    // Asked before sending: re-sending bytes the node already holds only fills its log with "already
    // imported" (and, behind a nonce gap, did so every second forever).
    const known = yield* account
      .rpc("transaction", () => client.request({ method: "eth_getTransactionByHash", params: [newest] }))
      .pipe(
        Effect.map((tx) => tx !== null),
        Effect.option,
      );
    const current = yield* fees.current(chain).pipe(Effect.option);
    const nodeHasTransaction = Option.getOrUndefined(known);
    const decision = decideTracking({
      nonce: row.nonce,
      receipt: undefined,
      receiptsAnswered: first.answered,
      minedNonce: Option.getOrUndefined(mined),
      nodeHasTransaction,
      ageMs: (yield* Clock.currentTimeMillis) - row.last_broadcast_at.getTime(),
      bumpAfterMs: Duration.toMillis(Duration.fromInputUnsafe(bumpAfter)),
      baseFeePerGas: Option.getOrUndefined(Option.map(current, (f) => f.baseFeePerGas)),
      maxFeePerGas: row.max_fee_per_gas,
    });
    switch (decision.kind) {
      case "wait":
      case "record":
        return;
      case "superseded": {
        // Looked at again a moment later: a mined batch of 200 charges was once marked superseded on
        // anvil under load, its charges failed and merchants told so. A node that counts a new block's
        // nonces before it serves the block's receipts would do that; so did a failed lookup, before.
        yield* Effect.sleep(SUPERSEDED_RECHECK);
        const again = yield* receiptOf(row);
        if (again.found) return yield* recordFinal(chain, row, again.found);
        if (!again.answered) return;
        return yield* store.recordSuperseded(row.id);
      }
      case "hold_for_fees":
        return yield* hold(chain, row, "fee_ceiling", "send");
      case "rebroadcast":
        return yield* rebroadcast(chain, row);
      case "replace":
        return yield* replace(chain, row, current, nodeHasTransaction);
    }
  });

/**
 * Fills the nonces below our pending transactions that nothing of ours will fill (the chain lost the
 * blocks that had them, or a submission's transaction took a nonce and rolled back) with empty
 * self-transfers, so the queued transactions can be mined. Gaps seen without the lock are checked again
 * under the account's exclusive lock: it waits for every submission in flight, whose nonce would
 * otherwise look like a gap until its transaction commits.
 */
const fillNonceGaps = (chain: ResolvedChain) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const clients = yield* ChainClients;
    const account = yield* RelayerAccount;
    const store = yield* RelayerStore;
    const address = account.address(chain.id);
    const from = account.from(chain.id);
    if (!address || !from) return;
    const client = clients.client(chain);
    const gapsNow = Effect.gen(function* () {
      const pending = yield* store.pendingNonces(chain.id, from);
      if (pending.length === 0) return [];
      const pool = yield* account.rpc("nonce", () =>
        client.getTransactionCount({ address, blockTag: "pending" }),
      );
      return nonceGaps(pool, pending);
    });
    if ((yield* gapsNow).length === 0) return;
    yield* sql.withTransaction(
      Effect.gen(function* () {
        yield* store.lockAccount(chain.id, from);
        const gaps = yield* gapsNow;
        if (gaps.length === 0) return;
        // Within the ceiling like every other transaction (a filler the base fee outprices waits too).
        const current = yield* (yield* RelayerFees).current(chain);
        const fees = capFees(current, feeCeiling(chain));
        if (!mineableAt(fees.maxFeePerGas, current.baseFeePerGas)) return;
        for (const nonce of gaps) {
          const signed = yield* account.sign(chain, {
            to: address,
            data: "0x",
            nonce,
            gas: 21_000n,
            maxFeePerGas: fees.maxFeePerGas,
            maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
          });
          yield* account.broadcast(chain, signed.raw);
        }
        yield* Effect.logWarning("filled a nonce gap").pipe(
          Effect.annotateLogs({ chain: chain.id, nonces: gaps.join(",") }),
        );
      }),
    );
  }).pipe(
    Effect.catchTag("RelayerError", (error) => Effect.logWarning("nonce gap check failed", error.message)),
  );

/** One tracking pass over the chains' pending transactions, each tracked by one process (SKIP LOCKED). */
export const trackPending = (bumpAfter: Duration.Input) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const registry = yield* ChainRegistry;
    const store = yield* RelayerStore;
    const chainIds = registry.all.map((chain) => chain.id);
    for (const chainId of yield* store.chainsWithPending(chainIds)) {
      const chain = registry.byId(chainId);
      if (chain) yield* fillNonceGaps(chain);
    }
    // Every account's, not only the current key's: a key rotated out leaves transactions to see mined.
    for (const id of yield* store.pendingIds(chainIds))
      yield* sql.withTransaction(
        Effect.gen(function* () {
          const row = yield* store.lockPending(id);
          if (row) yield* trackOne(row, bumpAfter);
        }),
      );
  }).pipe(
    Effect.catchTag("RelayerError", (error) => Effect.logWarning("relayer tracking failed", error.message)),
  );

/** The budget's totals are read for the last hour; those older than two hours are dropped. */
const KEEP_SPENDING_MS = 2 * 3_600_000;
const PRUNE_EVERY_MS = 60_000;

/** Tracks the relayer's pending transactions every second, and drops old budget totals every minute. */
export const relayerTracker = (bumpAfter: Duration.Input): Worker<TrackerRequirements> => {
  let prunedAt = 0;
  const prune = Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis;
    if (now - prunedAt < PRUNE_EVERY_MS) return;
    prunedAt = now;
    yield* (yield* RelayerStore).pruneSpending(new Date(now - KEEP_SPENDING_MS));
  });
  return {
    name: "relayer-tracker",
    pass: Effect.andThen(trackPending(bumpAfter), prune),
    interval: "1 second",
  };
};
