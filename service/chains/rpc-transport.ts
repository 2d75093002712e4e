/**
 * A chain's JSON-RPC transport, for the service and for the indexer: every HTTP URL the chain config
 * lists, with one request rate per chain and process, and the URLs whose head trails the others set aside.
 *
 * - **Rate.** Every call waits for a token of the chain's bucket (Effect's `RateLimiter`, token bucket,
 *   `rpc.requests_per_second`): a JSON-RPC batch takes as many tokens as it has calls, as providers count
 *   them. A 429 is retried by viem after the answer's `Retry-After`, then the next URL is tried.
 * - **Several URLs.** Calls go to the first usable URL in the config's order and move to the next one when
 *   a URL fails (a revert is the answer: viem's `shouldThrow`, as its `fallback` transport decides). A URL
 *   that could not answer (no connection, a timeout, an HTTP error, a rate limit) in the last
 *   FAILED_FOR_MS, or whose calls took more than twice the fastest URL's (and SLOW_MARGIN_MS more), goes
 *   after the others.
 *   Staying on one URL while it is healthy matters: the indexer takes a lower "latest" block from another
 *   URL for a reorg.
 * - **Lag.** With several URLs, each URL's head (`eth_blockNumber`) is read every `probeEveryMs`; a URL
 *   more than `rpc.max_lag_blocks` behind the best head is not used until it catches up (a node still
 *   syncing behind a load balancer made Ponder see a reorg beyond its finalized block: ponder#2221).
 *
 * Ponder uses this transport for a chain that lists several URLs (ponder.config.ts); given one URL it keeps
 * its own client, with its own adaptive rate (20 calls a second per URL at first) and no lag check.
 *
 * viem's own `fallback` with `rank` was the first choice: its ranking loop cannot be stopped (each
 * client built would ping its URLs for the life of the process), orders by latency alone (so a few
 * latency spikes move every call to another URL), and has no notion of a head.
 */
import { Duration, Effect } from "effect";
import { RateLimiter } from "effect/persistence";
import {
  BaseError,
  createTransport,
  type EIP1193RequestFn,
  http,
  RpcRequestError,
  shouldThrow,
  type Transport,
} from "viem";
import {
  DEFAULT_RPC_BATCH_SIZE,
  DEFAULT_RPC_MAX_LAG_BLOCKS,
  DEFAULT_RPC_REQUESTS_PER_SECOND,
  type ResolvedChain,
} from "./config.ts";

type FetchFn = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** A URL that failed this recently goes after the healthy ones. */
const FAILED_FOR_MS = 30_000;
/** A URL this much slower than twice the fastest goes after the others. */
const SLOW_MARGIN_MS = 100;
/**
 * The longest the first calls wait for the URLs' first heads: one call's timeout. A provider's slow
 * moment (a latency spike, a 429's Retry-After) is waited out, so a lagging URL listed first does not
 * answer them; only a URL that does not answer at all delays the process's first calls, once, by this.
 */
const FIRST_PROBE_WAIT_MS = 10_000;
/** Weight of the newest call's time in a URL's average. */
const LATENCY_WEIGHT = 0.2;

export interface RpcTransportOptions {
  /** The `fetch` behind each URL's HTTP transport (the service's own connection pool). */
  readonly fetchFn?: FetchFn;
  /** How often each URL's head is read when the chain has several (default 15 s). */
  readonly probeEveryMs?: number;
  /** Told when a URL is set aside for its lag, or taken back. */
  readonly onLag?: (change: LagChange) => void;
}

export interface LagChange {
  readonly chainId: number;
  /** The URL's host (its path and query may hold a provider's key). */
  readonly host: string;
  readonly index: number;
  readonly lagging: boolean;
  readonly head: bigint;
  readonly best: bigint;
}

export interface RpcNodeStatus {
  readonly host: string;
  readonly head: bigint | undefined;
  readonly lagging: boolean;
  readonly failing: boolean;
  readonly latencyMs: number | undefined;
}

export interface ChainTransport {
  readonly transport: Transport;
  readonly nodes: () => ReadonlyArray<RpcNodeStatus>;
  /** Stops reading the URLs' heads. */
  readonly stop: () => void;
}

/** The calls in a JSON-RPC request body: a batch's length, or 1. */
const callsIn = (body: BodyInit | null | undefined): number => {
  if (typeof body !== "string" || !body.startsWith("[")) return 1;
  try {
    const parsed: unknown = JSON.parse(body);
    return Array.isArray(parsed) ? Math.max(parsed.length, 1) : 1;
  } catch {
    return 1;
  }
};

/** The chain's calls per second, or undefined for no limit. */
export const requestsPerSecond = (chain: ResolvedChain): number | undefined =>
  chain.rpc.requests_per_second ?? (chain.local === undefined ? DEFAULT_RPC_REQUESTS_PER_SECOND : undefined);

/** `fetchFn` that first takes a token per call from the chain's bucket (waiting when it is empty). */
const rateLimited = (fetchFn: FetchFn, chainId: number, perSecond: number | undefined): FetchFn => {
  if (perSecond === undefined) return fetchFn;
  const limiter = Effect.runSync(Effect.provide(RateLimiter.make, RateLimiter.layerStoreMemory));
  const key = `rpc:${chainId}`;
  return async (input, init) => {
    const { delay } = await Effect.runPromise(
      limiter
        .consume({
          key,
          limit: perSecond,
          window: "1 second",
          tokens: Math.min(callsIn(init?.body), perSecond),
          algorithm: "token-bucket",
          onExceeded: "delay",
        })
        .pipe(Effect.orElseSucceed(() => ({ delay: Duration.zero }))),
    );
    const wait = Duration.toMillis(delay);
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    return fetchFn(input, init);
  };
};

/** JSON-RPC error codes by which providers say "slow down". */
const RATE_LIMITED_CODES = new Set([429, -32005]);

/**
 * Whether the node itself answered the call with an error (a revert, a refused range, an unknown
 * method): it is up, though the call may still be tried on the next URL. A failure to answer (no
 * connection, a timeout, an HTTP error status, a rate limit) marks the URL as failing.
 */
const answeredByNode = (error: unknown): boolean => {
  if (!(error instanceof BaseError)) return false;
  const rpcError = error.walk((e) => e instanceof RpcRequestError) as RpcRequestError | null;
  return (
    rpcError !== null &&
    (rpcError.status === undefined || rpcError.status < 400) &&
    !RATE_LIMITED_CODES.has(rpcError.code)
  );
};

interface Node {
  readonly index: number;
  readonly host: string;
  readonly request: EIP1193RequestFn;
  head: bigint | undefined;
  headAt: number;
  latencyMs: number | undefined;
  failedAt: number;
  lagging: boolean;
}

const hostOf = (url: string) => {
  try {
    return new URL(url).host;
  } catch {
    return "?";
  }
};

/** The transport of `chain`'s HTTP URLs (see the module's comment). */
export const chainTransport = (chain: ResolvedChain, options: RpcTransportOptions = {}): ChainTransport => {
  const batchSize = chain.rpc.batch_size ?? DEFAULT_RPC_BATCH_SIZE;
  const fetchFn = rateLimited(options.fetchFn ?? fetch, chain.id, requestsPerSecond(chain));
  const nodes: Node[] = chain.rpc.http.map((url, index) => ({
    index,
    host: hostOf(url),
    request: http(url, {
      retryCount: 2,
      timeout: 10_000,
      batch: batchSize > 1 ? { batchSize } : false,
      fetchFn,
      // fetchFn reads the answer up to its own cap (rpc-fetch.ts) when it is the service's.
      ...(options.fetchFn === undefined ? {} : { maxResponseBodySize: false }),
    })({ retryCount: 2 }).request,
    head: undefined,
    headAt: 0,
    latencyMs: undefined,
    failedAt: 0,
    lagging: false,
  }));
  const maxLag = BigInt(chain.rpc.max_lag_blocks ?? DEFAULT_RPC_MAX_LAG_BLOCKS);
  const probeEveryMs = options.probeEveryMs ?? 15_000;

  const timed = async <A>(node: Node, call: () => Promise<A>): Promise<A> => {
    const started = performance.now();
    try {
      const answer = await call();
      const took = performance.now() - started;
      node.latencyMs =
        node.latencyMs === undefined ? took : node.latencyMs + LATENCY_WEIGHT * (took - node.latencyMs);
      return answer;
    } catch (error) {
      if (!answeredByNode(error)) node.failedAt = Date.now();
      throw error;
    }
  };

  /** Usable URLs, best first: healthy before failing, fast before slow, then the config's order. */
  const usable = (): Node[] => {
    const now = Date.now();
    const candidates = nodes.filter((node) => !node.lagging);
    const fastest = Math.min(...candidates.map((node) => node.latencyMs ?? Number.POSITIVE_INFINITY));
    const rank = (node: Node) =>
      (now - node.failedAt < FAILED_FOR_MS ? 2 : 0) +
      (node.latencyMs !== undefined && node.latencyMs > 2 * fastest + SLOW_MARGIN_MS ? 1 : 0);
    return candidates.sort((a, b) => rank(a) - rank(b) || a.index - b.index);
  };

  const request: EIP1193RequestFn = async (args, requestOptions) => {
    // The first calls wait for the first heads (a little while at most): a lagging URL listed first
    // would otherwise answer them.
    if (firstProbe !== undefined) await firstProbe;
    let failure: unknown;
    for (const node of usable()) {
      try {
        return await timed(node, () => node.request(args, requestOptions));
      } catch (error) {
        if (error instanceof Error && shouldThrow(error)) throw error;
        failure = error;
      }
    }
    throw failure ?? new Error(`chain ${chain.id}: no RPC URL is usable`);
  };

  /** Reads every URL's head, then sets aside those too far behind the best (and takes back the others). */
  const probe = async () => {
    await Promise.all(
      nodes.map(async (node) => {
        try {
          const head = await timed(node, () => node.request({ method: "eth_blockNumber" }));
          node.head = BigInt(head as string);
          node.headAt = Date.now();
        } catch {
          // failing: known by failedAt; its last head stands until it is too old to count
        }
      }),
    );
    const recent = nodes.filter(
      (node) => node.head !== undefined && Date.now() - node.headAt < 3 * probeEveryMs,
    );
    const best = recent.reduce((max, node) => ((node.head ?? 0n) > max ? (node.head ?? 0n) : max), 0n);
    for (const node of nodes) {
      const lagging = node.head !== undefined && best - node.head > maxLag;
      if (lagging !== node.lagging) {
        node.lagging = lagging;
        options.onLag?.({
          chainId: chain.id,
          host: node.host,
          index: node.index,
          lagging,
          head: node.head ?? 0n,
          best,
        });
      }
    }
  };

  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const loop = (): Promise<void> => {
    if (stopped) return Promise.resolve();
    return probe().finally(() => {
      if (stopped) return;
      timer = setTimeout(loop, probeEveryMs);
      timer.unref();
    });
  };
  let firstProbe: Promise<unknown> | undefined =
    nodes.length > 1
      ? Promise.race([
          loop(),
          new Promise((resolve) => setTimeout(resolve, FIRST_PROBE_WAIT_MS).unref()),
        ]).then(() => {
          firstProbe = undefined;
        })
      : undefined;

  const first = nodes[0];
  return {
    // One URL: its own transport, no probing.
    transport:
      nodes.length === 1 && first !== undefined
        ? ({ retryCount }) =>
            createTransport({
              key: "rpc",
              name: "RPC",
              type: "rpc",
              request: first.request,
              retryCount: retryCount ?? 0,
            })
        : ({ retryCount }) =>
            createTransport({ key: "rpc", name: "RPC", type: "rpc", request, retryCount: retryCount ?? 0 }),
    nodes: () =>
      nodes.map((node) => ({
        host: node.host,
        head: node.head,
        lagging: node.lagging,
        failing: Date.now() - node.failedAt < FAILED_FOR_MS,
        latencyMs: node.latencyMs,
      })),
    stop: () => {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
};
