/**
 * The deposit watcher: reads the `Transfer` logs of the tokens that watched payments are in (a payment is
 * watched until a week after it expires), records each payer's transfer to a watched deposit address,
 * moves the payment to `processing` and marks its deposit address for the sweeper.
 *
 * Its cost does not grow with the open payments: per new block range, one `eth_getLogs` for every
 * transfer of those tokens (an address list, no recipient filter), whose recipients are then looked up
 * among the deposit addresses (the table's unique index). A topic filter of every watched address took a
 * call per 500 addresses on every pass (bench/watcher.ts measures both). The price is in the answers:
 * every transfer of the tokens on the chain, whoever receives it (a provider that refuses a range for its
 * size names a narrower one, which is taken). So while a chain has at most RECIPIENT_FILTER_MAX watched
 * addresses (most deployments, most of the time), the one call filters by recipient, and the answers
 * hold only their transfers. A chain whose head has not moved since the cursor is not
 * asked at all. The indexer does not do this: Ponder would store every one of those transfers, and it
 * cannot match recipients against the payments.
 *
 * It is only a trigger and a display: what a payment has received counts from the escrow's sweep events,
 * indexed and confirmed like every other fact. Its cursor per chain is in the database, written with what
 * it recorded, so a restart reads on from it. Each pass after a new block reads again the last
 * RESCAN_BLOCKS blocks before the cursor and replaces what it recorded there, so a transfer a reorg took
 * out disappears from the payment and one mined elsewhere appears. While the chain has no payment to
 * watch the cursor is dropped: the first payment after an idle time is read from the block it was
 * created in, not through the idle blocks.
 */

import { getLogsRetryHelper } from "@ponder/utils";
import { Effect } from "effect";
import { SqlClient } from "effect/sql";
import { type Hex, hexToBigInt, numberToHex, parseAbiItem, type RpcError } from "viem";
import { ChainClients, ChainUnavailable } from "../chains/chain-clients.ts";
import { ChainHeads } from "../chains/chain-heads.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { ChainRegistry } from "../chains/registry.ts";
import type { Worker } from "../workers/worker.ts";
import { type ObservedTransfer, PaymentStore } from "./payment-store.ts";
import { PaymentTransitions } from "./payment-transitions.ts";

const TRANSFER = parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)");
/**
 * Up to this many watched deposit addresses on a chain, the node is asked for their transfers only (a
 * topic filter, as providers take); above, for every transfer of the tokens.
 */
const RECIPIENT_FILTER_MAX = 500;
/** Blocks read per request; a watcher far behind catches up over several requests. */
const MAX_RANGE = 2_000n;
/** Blocks read again below the cursor after each new block (reorgs shallower than this are followed). */
export const RESCAN_BLOCKS = 16n;

/**
 * Where a range of `eth_getLogs` the provider refused should end instead: the end of the range its
 * message names (too many blocks or logs; @ponder/utils knows the messages of Alchemy, QuickNode, Infura
 * and others), when that is a narrower range from the same block. Undefined: not such a refusal.
 */
export const servedRangeEnd = (fromBlock: bigint, toBlock: bigint, error: unknown): bigint | undefined => {
  const retry = getLogsRetryHelper({
    params: [{ fromBlock: numberToHex(fromBlock), toBlock: numberToHex(toBlock) }],
    error: error as RpcError,
  });
  const range = retry.shouldRetry ? retry.ranges[0] : undefined;
  if (range === undefined || hexToBigInt(range.fromBlock) !== fromBlock) return undefined;
  const end = hexToBigInt(range.toBlock);
  return end >= fromBlock && end < toBlock ? end : undefined;
};

/** One chain: reads up to its head (in ranges of MAX_RANGE); returns the number of transfers recorded. */
const watchChain = (chain: ResolvedChain) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const clients = yield* ChainClients;
    const store = yield* PaymentStore;
    const transitions = yield* PaymentTransitions;
    const client = clients.client(chain);
    if (!(yield* store.mayWatch(chain.id))) {
      yield* store.forgetScannedBlock(chain.id);
      return 0;
    }
    const head = yield* (yield* ChainHeads).latestBlock(chain);
    const now = Number(head.timestamp);
    const scanned = yield* store.scannedBlock(chain.id);
    // Read through this head already; the next block reads the last RESCAN_BLOCKS again.
    if (scanned === head.number) return 0;
    const tokens = (yield* store.watchedTokens(chain.id, now)) as Hex[];
    if (tokens.length === 0) {
      yield* store.forgetScannedBlock(chain.id);
      return 0;
    }
    // Never before the oldest watched payment was created: without a cursor (the first pass after an idle
    // time), or with one left far behind (a process stopped during an idle time).
    let start = scanned;
    if (start === undefined || head.number - start > MAX_RANGE) {
      const oldest = yield* store.oldestWatchedBlock(chain.id, now);
      if (oldest !== undefined && (start === undefined || start < oldest - 1n)) start = oldest - 1n;
    }
    if (start === undefined) return 0;
    const from = start > RESCAN_BLOCKS ? start - RESCAN_BLOCKS : 0n;
    if (head.number <= from) return 0;
    // Few watched addresses (the usual case): the node filters by recipient and answers only their
    // transfers. More: every transfer of the tokens, matched below. One call per block range either way.
    const few = yield* store.watchedAddressesUpTo(chain.id, now, RECIPIENT_FILTER_MAX);
    const readLogs = (toBlock: bigint) =>
      Effect.tryPromise({
        try: () =>
          client.getLogs({
            address: tokens,
            event: TRANSFER,
            ...(few === undefined ? {} : { args: { to: few } }),
            fromBlock: from + 1n,
            toBlock,
          }),
        catch: (error) => error,
      });
    /** Up to `toBlock`, or up to the end of the narrower range a refusing provider names. */
    const readUpTo = (
      toBlock: bigint,
      attemptsLeft: number,
    ): Effect.Effect<
      { logs: Effect.Success<ReturnType<typeof readLogs>>; through: bigint },
      ChainUnavailable
    > =>
      readLogs(toBlock).pipe(
        Effect.map((logs) => ({ logs, through: toBlock })),
        Effect.catch((error) => {
          const end = servedRangeEnd(from + 1n, toBlock, error);
          return end === undefined || attemptsLeft === 0
            ? Effect.fail(
                new ChainUnavailable({
                  chainId: chain.id,
                  message: `transfer logs: ${String(error).split("\n")[0]}`,
                }),
              )
            : readUpTo(end, attemptsLeft - 1);
        }),
      );
    const read = yield* readUpTo(head.number - from > MAX_RANGE ? from + MAX_RANGE : head.number, 8);
    const through = read.through;
    const recipients = [...new Set(read.logs.map((log) => String(log.args.to).toLowerCase()))];
    const byAddress = new Map(
      (yield* store.watchedAt(chain.id, recipients, now)).map((w) => [w.address.toLowerCase(), w]),
    );
    const logs = read.logs.filter((log) => {
      const payment = byAddress.get(String(log.args.to).toLowerCase());
      return (
        payment !== undefined && payment.token.toLowerCase() === log.address.toLowerCase() && !!log.args.value
      );
    });
    // Nodes that put the block's time in each log spare a header per block.
    const untimed = [
      ...new Set(logs.filter((log) => typeof log.blockTimestamp !== "bigint").map((log) => log.blockNumber)),
    ];
    const times = new Map(
      yield* Effect.forEach(
        untimed,
        (number) =>
          Effect.map(
            clients.rpc(chain, "block", () => client.getBlock({ blockNumber: number })),
            (block) => [number, Number(block.timestamp)] as const,
          ),
        { concurrency: 8 },
      ),
    );
    const transfers = logs.flatMap((log): ObservedTransfer[] => {
      const payment = byAddress.get(String(log.args.to).toLowerCase());
      if (!payment || !log.args.value) return [];
      return [
        {
          chainId: chain.id,
          paymentId: payment.id,
          txHash: log.transactionHash,
          logIndex: log.logIndex,
          from: String(log.args.from),
          amount: log.args.value,
          blockNumber: log.blockNumber,
          blockHash: log.blockHash,
          timestamp:
            typeof log.blockTimestamp === "bigint"
              ? Number(log.blockTimestamp)
              : (times.get(log.blockNumber) ?? now),
        },
      ];
    });
    yield* sql.withTransaction(
      Effect.gen(function* () {
        const changed = yield* store.replaceTransfers(chain.id, now, from, through, transfers);
        if (changed.length > 0) {
          const rows = yield* store.lockMany(changed);
          const ids = rows.map((row) => row.id);
          const arrived = yield* store.transferTotals(ids);
          const swept = yield* store.sweptTotals(ids);
          yield* transitions.stepEach(
            rows.map((row) => {
              const waiting = (arrived.get(row.id) ?? 0n) - (swept.get(row.id) ?? 0n);
              return { row, input: { kind: "seen", amount: waiting > 0n ? waiting : 0n }, cause: { now } };
            }),
          );
          yield* store.markSweepDue(changed);
        }
        yield* store.saveScannedBlock(chain.id, through);
      }),
    );
    return transfers.length;
  });

/** One pass over every chain taking payments (chains in parallel, each failing on its own). */
export const watchDeposits = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  yield* Effect.forEach(
    registry.all,
    (chain) =>
      watchChain(chain).pipe(
        Effect.catchTag("ChainUnavailable", (error) =>
          Effect.as(
            Effect.logWarning("deposit watcher could not read the chain").pipe(
              Effect.annotateLogs({ chain: chain.id, reason: error.message }),
            ),
            0,
          ),
        ),
      ),
    { concurrency: "unbounded", discard: true },
  );
});

export const depositWatcher: Worker<
  SqlClient.SqlClient | ChainRegistry | ChainClients | ChainHeads | PaymentStore | PaymentTransitions
> = {
  name: "deposit-watcher",
  pass: watchDeposits,
  interval: "500 millis",
};
