/**
 * The deposit watcher: reads the configured tokens' `Transfer` logs to the deposit addresses of watched
 * payments (a payment is watched until a week after it expires), records each payer's transfer, moves
 * the payment to `processing` and marks its deposit address for the sweeper.
 *
 * The indexer cannot do this: Ponder filters logs by their emitting contract, not a token's transfers
 * by a changing list of recipients. So the watcher asks the RPC itself, per block range, with the
 * deposit addresses as a topic filter (chunks of ADDRESS_CHUNK), and keeps its own cursor per chain.
 * It is only a trigger and a display: what a payment has received counts from the escrow's sweep
 * events, indexed and confirmed like every other fact. A range the provider refuses (too many blocks or
 * logs) is narrowed to the one its message suggests. Each pass reads again the last RESCAN_BLOCKS
 * blocks before its cursor and replaces what it recorded there, so a transfer a reorg took out
 * disappears from the payment and one mined elsewhere appears.
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
/** Recipients per `eth_getLogs` topic filter. */
const ADDRESS_CHUNK = 500;
/** Blocks read per request; a watcher far behind catches up over several requests. */
const MAX_RANGE = 2_000n;
/** Blocks read again below the cursor on every pass (reorgs shallower than this are followed). */
export const RESCAN_BLOCKS = 16n;

const chunks = <A>(items: ReadonlyArray<A>, size: number): A[][] => {
  const out: A[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
};

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
    if (!(yield* store.mayWatch(chain.id))) return 0;
    const head = yield* (yield* ChainHeads).latestBlock(chain);
    const watched = yield* store.watched(chain.id, Number(head.timestamp));
    if (watched.length === 0) return 0;
    // From the cursor, but never before the oldest watched payment was created (after an idle time).
    const created = watched.reduce(
      (min, w) => (BigInt(w.created_block) < min ? BigInt(w.created_block) : min),
      head.number,
    );
    const scanned = yield* store.scannedBlock(chain.id);
    const start = scanned === undefined || scanned < created - 1n ? created - 1n : scanned;
    const from = start > RESCAN_BLOCKS ? start - RESCAN_BLOCKS : 0n;
    if (head.number <= from) return 0;
    const byAddress = new Map(watched.map((w) => [w.address.toLowerCase(), w]));
    const tokens = [...new Set(watched.map((w) => w.token.toLowerCase()))];
    const filters = tokens.flatMap((token) =>
      chunks(
        watched.filter((w) => w.token.toLowerCase() === token).map((w) => w.address as Hex),
        ADDRESS_CHUNK,
      ).map((to) => ({ token, to })),
    );
    const readLogs = (toBlock: bigint) =>
      Effect.forEach(
        filters,
        ({ token, to }) =>
          Effect.tryPromise({
            try: () =>
              client.getLogs({
                address: token as Hex,
                event: TRANSFER,
                args: { to },
                fromBlock: from + 1n,
                toBlock,
              }),
            catch: (error) => error,
          }),
        { concurrency: 4 },
      );
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
    const logs = read.logs.flat();
    const blocks = [...new Set(logs.map((log) => log.blockNumber))];
    const times = new Map(
      yield* Effect.forEach(
        blocks,
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
      if (!payment || payment.token.toLowerCase() !== log.address.toLowerCase() || !log.args.value) return [];
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
          timestamp: times.get(log.blockNumber) ?? Number(head.timestamp),
        },
      ];
    });
    yield* sql.withTransaction(
      Effect.gen(function* () {
        const changed = yield* store.replaceTransfers(
          chain.id,
          watched.map((w) => w.id),
          from,
          through,
          transfers,
        );
        if (changed.length > 0) {
          const rows = yield* store.lockMany(changed);
          const ids = rows.map((row) => row.id);
          const arrived = yield* store.transferTotals(ids);
          const swept = yield* store.sweptTotals(ids);
          for (const row of rows) {
            const waiting = (arrived.get(row.id) ?? 0n) - (swept.get(row.id) ?? 0n);
            yield* transitions.step(
              row,
              { kind: "seen", amount: waiting > 0n ? waiting : 0n },
              { now: Number(head.timestamp) },
            );
          }
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
