/**
 * Each chain's newest block (number and timestamp), kept in process so that a request that needs "now"
 * on a chain (a mandate's anchor, a signature's deadline, whether a hold has ended) does not wait on a
 * JSON-RPC. The head comes from the node itself: its `newHeads` subscription when the chain has a
 * WebSocket URL (a new block is seen within milliseconds), and a poll of the latest block every
 * `pollEveryMillis` when no head arrived for that long. The poll bounds the staleness on every chain: a
 * head is used only while it was confirmed as the newest within `maxAgeMillis`; otherwise (cold, the node
 * unreachable) the caller gets a fresh RPC, as from `ChainClients.latestTime`. While the subscription is
 * live, a quiet chain has simply made no block: the poll then runs every `subscribedPollEveryMillis`
 * (against a socket that stopped delivering without an error), and a head counts as confirmed for that
 * long plus `maxAgeMillis`.
 *
 * This is the process's one head per chain: the API's requests and every worker read it (the billing
 * worker, the releasers, expiry, the watchdog), so an idle process asks each chain for its head once per
 * `subscribedPollEveryMillis`, not once per worker and second (scripts/rpc-census.ts counts it). A
 * worker acting on a head up to that old only acts later, never earlier: heads only grow, and what it
 * sends the chain checks again. Charges read the chain's time afresh (`ChainClients.latestTime`): a
 * charge must not see a period boundary late.
 *
 * Why the node and not the indexer's head (`onchain.chain_head`): reading it costs a database statement
 * on the request's pooled connection, it trails the node by the indexer's latency, and it stops moving
 * when Ponder stalls (see indexer-watchdog.ts), which a staleness bound could only detect with an RPC.
 */
import { Clock, Context, Deferred, Effect, Exit, Layer, Schedule, Schema } from "effect";
import { createPublicClient, webSocket } from "viem";
import { ChainClients, type ChainUnavailable } from "./chain-clients.ts";
import type { ResolvedChain } from "./config.ts";
import { ChainRegistry } from "./registry.ts";

export interface Head {
  readonly number: bigint;
  /** Block time, unix seconds. */
  readonly timestamp: number;
}

export interface ChainHeadsOptions {
  /** A chain without a new head for this long is asked for its latest block. */
  readonly pollEveryMillis: number;
  /** A head confirmed as the newest this long ago or longer is not used (0: always read the chain). */
  readonly maxAgeMillis: number;
  /** The poll's period while the chain's `newHeads` subscription is live (default: pollEveryMillis). */
  readonly subscribedPollEveryMillis?: number;
}

/**
 * Polled every second, trusted for two: at most one block old on chains of a block every second or
 * slower. With a live subscription, polled every 15 s.
 */
export const DEFAULT_HEAD_OPTIONS: ChainHeadsOptions = {
  pollEveryMillis: 1_000,
  maxAgeMillis: 2_000,
  subscribedPollEveryMillis: 15_000,
};

const RESUBSCRIBE_AFTER = "1 second";
const CLOSE_WAIT_MILLIS = 1_000;

/** `work`, or nothing once `ms` have passed; its failure is dropped. */
const atMost = (ms: number, work: Promise<unknown>): Promise<unknown> =>
  Promise.race([work.catch(() => undefined), new Promise((resolve) => setTimeout(resolve, ms).unref())]);

const Quantity = Schema.String.check(Schema.isPattern(/^0x[0-9a-fA-F]{1,64}$/));
/** The part of a `newHeads` notification (as viem passes it on) that we use. */
const NewHead = Schema.Struct({ result: Schema.Struct({ number: Quantity, timestamp: Quantity }) });
const decodeNewHead = Schema.decodeUnknownOption(NewHead);

export class ChainHeads extends Context.Service<
  ChainHeads,
  {
    /** "Now" on the chain: its newest block's timestamp, at most `maxAgeMillis` old. */
    readonly latestTime: (chain: ResolvedChain) => Effect.Effect<number, ChainUnavailable>;
    /** The chain's newest block, at most `maxAgeMillis` old. */
    readonly latestBlock: (chain: ResolvedChain) => Effect.Effect<Head, ChainUnavailable>;
    /** Reads the chain's latest block now and keeps it (after the caller moved the chain, say). */
    readonly refresh: (chain: ResolvedChain) => Effect.Effect<Head, ChainUnavailable>;
  }
>()("ChainHeads") {
  static readonly layer = (
    options: ChainHeadsOptions = DEFAULT_HEAD_OPTIONS,
  ): Layer.Layer<ChainHeads, never, ChainClients | ChainRegistry> =>
    Layer.effect(
      ChainHeads,
      Effect.gen(function* () {
        const clients = yield* ChainClients;
        const registry = yield* ChainRegistry;
        const clock = yield* Clock.Clock;
        const heads = new Map<number, { head: Head; confirmedAt: number }>();
        /** Chains whose `newHeads` subscription is live. */
        const subscribed = new Set<number>();
        const subscribedPoll = options.subscribedPollEveryMillis ?? options.pollEveryMillis;
        const pollEvery = (chainId: number) =>
          subscribed.has(chainId)
            ? Math.max(subscribedPoll, options.pollEveryMillis)
            : options.pollEveryMillis;
        const maxAge = (chainId: number) =>
          options.maxAgeMillis === 0
            ? 0
            : subscribed.has(chainId)
              ? pollEvery(chainId) + options.maxAgeMillis
              : options.maxAgeMillis;

        /**
         * The node's answer is the head, even a lower one (a reorg to a shorter chain, a restarted dev
         * chain); a poll answered just after a newer subscribed head costs at most that one block.
         */
        const record = (chainId: number, head: Head) => {
          heads.set(chainId, { head, confirmedAt: clock.currentTimeMillisUnsafe() });
          return head;
        };

        const refresh = (chain: ResolvedChain) =>
          Effect.map(clients.latestBlock(chain), (block) => record(chain.id, block));

        const latestBlock = (chain: ResolvedChain) =>
          Effect.suspend(() => {
            const known = heads.get(chain.id);
            return known !== undefined &&
              clock.currentTimeMillisUnsafe() - known.confirmedAt < maxAge(chain.id)
              ? Effect.succeed(known.head)
              : refresh(chain);
          });

        const poll = (chain: ResolvedChain) =>
          Effect.suspend(() => {
            const known = heads.get(chain.id);
            const quiet =
              known === undefined ||
              clock.currentTimeMillisUnsafe() - known.confirmedAt >= pollEvery(chain.id);
            return quiet ? Effect.ignore(refresh(chain)) : Effect.void;
          }).pipe(Effect.repeat(Schedule.spaced(options.pollEveryMillis)));

        /**
         * Lives until the socket reports an error; the caller subscribes again. A node that stops answering
         * holds nothing up: the subscribe call can be interrupted (by the service's shutdown), and each
         * closing step is waited for at most CLOSE_WAIT_MILLIS. The socket is closed whatever happened.
         */
        const subscribe = (chain: ResolvedChain, url: string) =>
          Effect.gen(function* () {
            const broken = yield* Deferred.make<void, unknown>();
            const client = createPublicClient({ transport: webSocket(url, { reconnect: false }) });
            yield* Effect.addFinalizer(() =>
              Effect.promise(() =>
                atMost(
                  CLOSE_WAIT_MILLIS,
                  client.transport.getRpcClient().then((socket) => socket.close()),
                ),
              ),
            );
            const subscription = yield* Effect.tryPromise(() =>
              client.transport.subscribe({
                params: ["newHeads"],
                onData: (data) => {
                  const head = decodeNewHead(data);
                  if (head._tag === "Some") {
                    const { number, timestamp } = head.value.result;
                    record(chain.id, { number: BigInt(number), timestamp: Number(BigInt(timestamp)) });
                  }
                },
                onError: (error) => Deferred.doneUnsafe(broken, Exit.fail(error)),
              }),
            );
            yield* Effect.addFinalizer(() =>
              Effect.promise(() => atMost(CLOSE_WAIT_MILLIS, subscription.unsubscribe())),
            );
            subscribed.add(chain.id);
            yield* Effect.addFinalizer(() => Effect.sync(() => subscribed.delete(chain.id)));
            return yield* Deferred.await(broken);
          }).pipe(
            Effect.scoped,
            Effect.catchCause(() => Effect.sleep(RESUBSCRIBE_AFTER)),
            Effect.forever,
          );

        for (const chain of registry.all) {
          yield* Effect.forkScoped(poll(chain));
          if (chain.rpc.ws !== undefined) yield* Effect.forkScoped(subscribe(chain, chain.rpc.ws));
        }

        return {
          latestBlock,
          latestTime: (chain: ResolvedChain) => Effect.map(latestBlock(chain), (head) => head.timestamp),
          refresh,
        };
      }),
    );
}
