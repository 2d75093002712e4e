/**
 * The indexer watchdog. Ponder 0.17.7 can stall for good (a reorg that replaces a block while its logs
 * are being fetched): the chain stops being indexed and nothing says so. A worker compares, per chain,
 * the chain's head (its RPC) with the indexed head (`onchain.chain_head`); when the chain moved on and
 * the indexed head has not moved for `stallSeconds`, the chain is stalled: `/ready` names it, the
 * metric `billing_indexer_stalled` is 1 and `GET /indexer/live` answers 503, which is what a process
 * supervisor watches to restart the indexer. The same pass caches what the operator metrics need from
 * the chain (its head and the relayer's balance, whose thresholds relayer-balance.ts watches), so a
 * scrape never waits on an RPC. The head is the process's shared one (chain-heads.ts), and the balance
 * is read again only when the head moved: on a quiet chain the watchdog sends no RPC at all.
 *
 * A Ponder that answers its own `/ready` with 503 is backfilling and does not count; an unreachable one
 * does (a frozen process answers nothing). A stall outranks Ponder's own opinion in our `/ready`. The
 * service restarts nothing itself: it cannot (the indexer is another process, maybe on another machine)
 * and must not exit (its API and webhooks do not depend on the indexer). The local stack's supervisor
 * (scripts/stack/indexer-supervisor.ts) kills and restarts the indexer on the 503.
 */
import { Clock, Context, Duration, Effect, Layer, Option, Ref, Schema } from "effect";
import { SqlClient } from "effect/sql";
import { ONCHAIN_SCHEMA } from "../db/client.ts";
import { decodeRows } from "../db/rows.ts";
import type { Worker } from "../workers/worker.ts";
import type { ChainClients } from "./chain-clients.ts";
import { ChainHeads } from "./chain-heads.ts";
import type { ResolvedChain } from "./config.ts";
import { ChainRegistry } from "./registry.ts";
import { RelayerBalances } from "./relayer-balance.ts";

export interface BlockMark {
  readonly number: bigint;
  /** Block time, unix seconds. */
  readonly timestamp: number;
}

/** What Ponder's own `/ready` says: 503 while it backfills (its heads lag legitimately). */
export type IndexerProcess = "live" | "backfilling" | "unreachable" | "unknown";

export interface ChainObservation {
  /** The chain's newest block from its RPC; undefined when the RPC did not answer. */
  readonly head: BlockMark | undefined;
  /** The newest indexed block; undefined before the first. */
  readonly indexed: BlockMark | undefined;
  readonly indexer: IndexerProcess;
  readonly relayerBalance: bigint | undefined;
}

export interface ChainWatchEntry {
  readonly chainId: number;
  /** The newest chain head seen (kept when the RPC misses a check). */
  readonly head: BlockMark | undefined;
  readonly indexed: BlockMark | undefined;
  /** Since when (ms) the indexer has been behind the chain without progress; undefined: it is not. */
  readonly behindSince: number | undefined;
  readonly stalled: boolean;
  readonly relayerBalance: bigint | undefined;
}

/**
 * One check of one chain. Behind means the chain's head is above the indexed head; each advance of the
 * indexed head restarts the clock, so an indexer that is slow but moving never counts as stalled, and
 * neither does one still backfilling (its head row advances only once it is live). A check without an
 * answer from the RPC restarts it too: whether the chain moves is then unknown (an RPC frozen for 30 s
 * in the fault tests would otherwise have been read as a stall the moment it answered again).
 */
export const observeChain = (
  chainId: number,
  previous: ChainWatchEntry | undefined,
  seen: ChainObservation,
  now: number,
  stallMs: number,
): ChainWatchEntry => {
  const head = seen.head ?? previous?.head;
  const indexed = seen.indexed;
  const behind = head !== undefined && indexed !== undefined && head.number > indexed.number;
  const progressed = indexed?.number !== previous?.indexed?.number;
  const behindSince =
    !behind || seen.head === undefined || seen.indexer === "backfilling"
      ? undefined
      : progressed || previous?.behindSince === undefined
        ? now
        : previous.behindSince;
  return {
    chainId,
    head,
    indexed,
    behindSince,
    stalled: behindSince !== undefined && now - behindSince >= stallMs,
    relayerBalance: seen.relayerBalance ?? previous?.relayerBalance,
  };
};

export class ChainWatch extends Context.Service<
  ChainWatch,
  {
    readonly entries: Ref.Ref<ReadonlyMap<number, ChainWatchEntry>>;
    /** Ids of the chains whose indexing is stalled, ascending. */
    readonly stalled: Effect.Effect<ReadonlyArray<number>>;
  }
>()("ChainWatch") {
  static readonly layer = Layer.effect(
    ChainWatch,
    Effect.gen(function* () {
      const entries = yield* Ref.make<ReadonlyMap<number, ChainWatchEntry>>(new Map());
      const stalled = Effect.map(Ref.get(entries), (map) =>
        [...map.values()]
          .filter((entry) => entry.stalled)
          .map((entry) => entry.chainId)
          .sort((a, b) => a - b),
      );
      return { entries, stalled };
    }),
  );
}

/** `stalled: chain 31337` (or `stalled: chain 1, chain 10`) for /ready. */
export const describeStalled = (chainIds: ReadonlyArray<number>): string =>
  `stalled: ${chainIds.map((id) => `chain ${id}`).join(", ")}`;

const IndexedHead = Schema.Struct({
  chain_id: Schema.Number,
  block_number: Schema.String,
  timestamp: Schema.String,
});
const decodeIndexedHeads = decodeRows(IndexedHead);

/** The newest indexed block per chain, with its time (one Ponder relation, see onchain.ts). */
export const indexedHeads = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const rows = yield* sql`
    SELECT chain_id, block_number::text, timestamp::text FROM ${sql(ONCHAIN_SCHEMA)}.chain_head`.pipe(
    Effect.flatMap(decodeIndexedHeads),
  );
  return new Map<number, BlockMark>(
    rows.map((row) => [row.chain_id, { number: BigInt(row.block_number), timestamp: Number(row.timestamp) }]),
  );
});

const RPC_TIMEOUT = Duration.seconds(3);

const probeIndexer = (ponderUrl: string | undefined): Effect.Effect<IndexerProcess> =>
  ponderUrl === undefined
    ? Effect.succeed("unknown")
    : Effect.tryPromise((signal) => fetch(`${ponderUrl}/ready`, { signal })).pipe(
        Effect.map((response): IndexerProcess => {
          void response.body?.cancel();
          return response.status === 200 ? "live" : response.status === 503 ? "backfilling" : "unreachable";
        }),
        Effect.timeout("1 second"),
        Effect.orElseSucceed((): IndexerProcess => "unreachable"),
      );

/** The process's head of the chain (chain-heads.ts: no RPC of its own while the head is young). */
const chainHead = (chain: ResolvedChain) =>
  Effect.gen(function* () {
    const heads = yield* ChainHeads;
    return yield* heads
      .latestBlock(chain)
      .pipe(Effect.timeout(RPC_TIMEOUT), Effect.option, Effect.map(Option.getOrUndefined));
  });

/** The relayer's balance, read through its watch (which alerts on the chain's thresholds). */
const relayerBalance = (chain: ResolvedChain) =>
  Effect.flatMap(RelayerBalances, (balances) => balances.read(chain));

export interface WatchdogOptions {
  /** How long the indexer may stay behind a moving chain without progress before it counts as stalled. */
  readonly stallSeconds: number;
  /** The indexer's own HTTP server, to tell a backfill from a stall; undefined: not known here. */
  readonly ponderUrl: string | undefined;
}

/** Checks every chain a few times per stall period (every 1 to 5 s). */
export const watchdogInterval = (stallSeconds: number): Duration.Duration =>
  Duration.clamp(Duration.millis((stallSeconds * 1000) / 4), {
    minimum: Duration.seconds(1),
    maximum: Duration.seconds(5),
  });

export const indexerWatchdog = (
  options: WatchdogOptions,
): Worker<SqlClient.SqlClient | ChainRegistry | ChainClients | ChainHeads | RelayerBalances | ChainWatch> => {
  /** The head at which each chain's relayer balance was last read. */
  const balanceReadAt = new Map<number, bigint>();
  const headAndBalance = (chain: ResolvedChain) =>
    Effect.gen(function* () {
      const head = yield* chainHead(chain);
      if (head === undefined || balanceReadAt.get(chain.id) === head.number)
        return [head, undefined] as const;
      const balance = yield* relayerBalance(chain);
      if (balance !== undefined) balanceReadAt.set(chain.id, head.number);
      return [head, balance] as const;
    });
  return {
    name: "indexer-watchdog",
    interval: watchdogInterval(options.stallSeconds),
    pass: Effect.gen(function* () {
      const registry = yield* ChainRegistry;
      const watch = yield* ChainWatch;
      const [indexed, indexer, chains] = yield* Effect.all(
        [
          indexedHeads,
          probeIndexer(options.ponderUrl),
          Effect.forEach(registry.all, headAndBalance, { concurrency: "unbounded" }),
        ],
        { concurrency: "unbounded" },
      );
      const now = yield* Clock.currentTimeMillis;
      const previous = yield* Ref.get(watch.entries);
      const next = new Map<number, ChainWatchEntry>();
      registry.all.forEach((chain, i) => {
        const [head, balance] = chains[i] ?? [undefined, undefined];
        next.set(
          chain.id,
          observeChain(
            chain.id,
            previous.get(chain.id),
            { head, indexed: indexed.get(chain.id), indexer, relayerBalance: balance },
            now,
            options.stallSeconds * 1000,
          ),
        );
      });
      yield* Ref.set(watch.entries, next);
      for (const entry of next.values()) {
        const was = previous.get(entry.chainId)?.stalled ?? false;
        const details = {
          chain: entry.chainId,
          chain_head: String(entry.head?.number),
          indexed_head: String(entry.indexed?.number),
        };
        if (entry.stalled && !was)
          yield* Effect.logError("indexer stalled: the chain moves on and its indexed head does not").pipe(
            Effect.annotateLogs({ ...details, stall_seconds: options.stallSeconds }),
          );
        if (!entry.stalled && was)
          yield* Effect.logInfo("indexer moving again").pipe(Effect.annotateLogs(details));
      }
    }),
  };
};
