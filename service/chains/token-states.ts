/**
 * What a token's issuer decided that the service must respect. Circle's USDC (FiatToken v2.2) has a
 * pauser, who can stop every transfer, approve, permit and EIP-3009 transfer of the token at once
 * (`Pausable: paused`), and a blacklister, whose blacklisted addresses can neither send, receive nor
 * move the token for others (`Blacklistable: account is blacklisted`; the reason does not say which
 * address). Nothing here decides what to do about it: the charge engine, the releasers, the sweeper,
 * billing and the API ask.
 *
 * - **Paused**: read with `paused()`, once per new chain head and at most once a second per token (the
 *   `token-watch` worker), kept in process. Workers and requests ask the kept answer, never the chain,
 *   so a pause costs one read per token, not one per item. A simulation that meets the pause before the
 *   watch does marks the token paused at once (`notePaused`). A token without `paused()` is never
 *   paused and never asked again.
 * - **Blacklisted**: read with `isBlacklisted(address)` only when something failed (to say whose
 *   address it was) or was held back (to learn early that it was cleared); each answer is kept
 *   BLACKLIST_TTL.
 */
import { Clock, Context, Duration, Effect, Layer, Option } from "effect";
import { type Hex, parseAbi } from "viem";
import type { Unavailable } from "../errors.ts";
import type { Worker } from "../workers/worker.ts";
import { ChainClients, ChainUnavailable, lacksFunction } from "./chain-clients.ts";
import { ChainHeads } from "./chain-heads.ts";
import type { ResolvedChain } from "./config.ts";
import { ChainRegistry } from "./registry.ts";
import { tokenPaused } from "./unavailable.ts";

const issuerAbi = parseAbi([
  "function paused() view returns (bool)",
  "function isBlacklisted(address account) view returns (bool)",
]);

/** How long an `isBlacklisted` answer is trusted. */
export const BLACKLIST_TTL = Duration.seconds(3);

/** A configured token as last read. */
export interface TokenStatus {
  readonly chainId: number;
  readonly token: Hex;
  readonly symbol: string;
  readonly paused: boolean;
  /** Since when (ms, the service's clock) it has been seen paused. */
  readonly pausedSince: number | undefined;
}

const keyOf = (chainId: number, token: string) => `${chainId}:${token.toLowerCase()}`;

export class TokenStates extends Context.Service<
  TokenStates,
  {
    /** Whether the token was paused at the last read (no RPC). */
    readonly isPaused: (chainId: number, token: string) => Effect.Effect<boolean>;
    /** The chain's tokens paused at the last read, as lowercase addresses (no RPC). */
    readonly pausedTokens: (chainId: number) => Effect.Effect<ReadonlyArray<string>>;
    /** Fails with 503 `token_paused`, naming the token, while it is paused. */
    readonly guard: (chain: ResolvedChain, token: string) => Effect.Effect<void, Unavailable>;
    /** A simulation met the pause: the token counts as paused until the next read says otherwise. */
    readonly notePaused: (chain: ResolvedChain, token: string) => Effect.Effect<void>;
    /** Reads `paused()` of the chain's tokens when the chain has a new head since the last read. */
    readonly refresh: (chain: ResolvedChain) => Effect.Effect<void>;
    /** Those of `addresses` (lowercase) that the token has blacklisted. */
    readonly blacklisted: (
      chain: ResolvedChain,
      token: string,
      addresses: ReadonlyArray<string>,
    ) => Effect.Effect<ReadonlySet<string>, ChainUnavailable>;
    /** Every configured token as last read (for `/ready` and the metrics). */
    readonly snapshot: Effect.Effect<ReadonlyArray<TokenStatus>>;
  }
>()("TokenStates") {
  static readonly layer = Layer.effect(
    TokenStates,
    Effect.gen(function* () {
      const clients = yield* ChainClients;
      const heads = yield* ChainHeads;
      const registry = yield* ChainRegistry;
      const clock = yield* Clock.Clock;
      const paused = new Map<string, { readonly since: number }>();
      const unpausable = new Set<string>();
      const readAtHead = new Map<number, bigint>();
      const blacklist = new Map<string, { readonly value: boolean; readonly at: number }>();

      const setPaused = (chain: ResolvedChain, token: string, value: boolean) =>
        Effect.gen(function* () {
          const key = keyOf(chain.id, token);
          const was = paused.has(key);
          if (value === was) return;
          const symbol = registry
            .byId(chain.id)
            ?.tokens.find((t) => keyOf(chain.id, t.address) === key)?.symbol;
          const details = { chain: chain.id, token: token.toLowerCase(), symbol: symbol ?? "?" };
          if (value) {
            paused.set(key, { since: clock.currentTimeMillisUnsafe() });
            yield* Effect.logWarning("token paused by its issuer: nothing is sent for it").pipe(
              Effect.annotateLogs(details),
            );
          } else {
            paused.delete(key);
            yield* Effect.logInfo("token unpaused: sending resumes").pipe(Effect.annotateLogs(details));
          }
        });

      /** Reads and keeps the token's `paused()`; false when the RPC did not answer. */
      const readPaused = (chain: ResolvedChain, token: Hex) =>
        Effect.tryPromise({
          try: () =>
            clients.client(chain).readContract({ address: token, abi: issuerAbi, functionName: "paused" }),
          catch: (error) => error,
        }).pipe(
          Effect.flatMap((value) => setPaused(chain, token, value)),
          Effect.as(true),
          Effect.catch((error) =>
            lacksFunction(error)
              ? Effect.as(
                  Effect.sync(() => unpausable.add(keyOf(chain.id, token))),
                  true,
                )
              : Effect.as(
                  Effect.logDebug("token's paused() not read").pipe(
                    Effect.annotateLogs({ chain: chain.id, token, reason: String(error).split("\n")[0] }),
                  ),
                  false,
                ),
          ),
        );

      const refresh = (chain: ResolvedChain) =>
        Effect.gen(function* () {
          const head = yield* heads.latestBlock(chain).pipe(Effect.option);
          if (Option.isNone(head) || readAtHead.get(chain.id) === head.value.number) return;
          const read = yield* Effect.forEach(
            chain.tokens.filter((t) => !unpausable.has(keyOf(chain.id, t.address))),
            (t) => readPaused(chain, t.address),
            { concurrency: "unbounded" },
          );
          // A read the RPC did not answer is asked again on the next pass, not at the next head.
          if (read.every(Boolean)) readAtHead.set(chain.id, head.value.number);
        });

      const isPaused = (chainId: number, token: string) =>
        Effect.sync(() => paused.has(keyOf(chainId, token)));

      const blacklisted = (chain: ResolvedChain, token: string, addresses: ReadonlyArray<string>) =>
        Effect.gen(function* () {
          const now = clock.currentTimeMillisUnsafe();
          const ttl = Duration.toMillis(BLACKLIST_TTL);
          const found = new Set<string>();
          yield* Effect.forEach(
            [...new Set(addresses.map((a) => a.toLowerCase()))],
            (address) => {
              const key = `${keyOf(chain.id, token)}:${address}`;
              const known = blacklist.get(key);
              if (known !== undefined && now - known.at < ttl) {
                if (known.value) found.add(address);
                return Effect.void;
              }
              return Effect.tryPromise({
                try: () =>
                  clients.client(chain).readContract({
                    address: token as Hex,
                    abi: issuerAbi,
                    functionName: "isBlacklisted",
                    args: [address as Hex],
                  }),
                catch: (error) => error,
              }).pipe(
                // A token without a blacklist blacklists nobody.
                Effect.catch((error) =>
                  lacksFunction(error)
                    ? Effect.succeed(false)
                    : Effect.fail(
                        new ChainUnavailable({
                          chainId: chain.id,
                          message: `isBlacklisted: ${String(error).split("\n")[0]}`,
                        }),
                      ),
                ),
                Effect.tap((value) =>
                  Effect.sync(() => {
                    blacklist.set(key, { value, at: now });
                    if (value) found.add(address);
                  }),
                ),
              );
            },
            { concurrency: "unbounded", discard: true },
          );
          return found as ReadonlySet<string>;
        });

      const snapshot = Effect.sync(() =>
        registry.all.flatMap((chain) =>
          chain.tokens.map((t): TokenStatus => {
            const state = paused.get(keyOf(chain.id, t.address));
            return {
              chainId: chain.id,
              token: t.address,
              symbol: t.symbol,
              paused: state !== undefined,
              pausedSince: state?.since,
            };
          }),
        ),
      );

      return {
        isPaused,
        pausedTokens: (chainId: number) =>
          Effect.sync(() =>
            [...paused.keys()]
              .filter((key) => key.startsWith(`${chainId}:`))
              .map((key) => key.slice(`${chainId}:`.length)),
          ),
        guard: (chain: ResolvedChain, token: string) =>
          Effect.flatMap(isPaused(chain.id, token), (is) =>
            is ? Effect.fail(tokenPaused(chain, token)) : Effect.void,
          ),
        notePaused: (chain: ResolvedChain, token: string) => setPaused(chain, token, true),
        refresh,
        blacklisted,
        snapshot,
      };
    }),
  );
}

/** Reads each chain's tokens' `paused()` once per new head (the head itself is ChainHeads', usually no RPC). */
export const tokenWatch: Worker<ChainRegistry | TokenStates> = {
  name: "token-watch",
  interval: "1 second",
  pass: Effect.gen(function* () {
    const registry = yield* ChainRegistry;
    const states = yield* TokenStates;
    yield* Effect.forEach(registry.all, states.refresh, { concurrency: "unbounded", discard: true });
  }),
};

/** `/ready`'s `tokens`: `ready`, or `paused: USDC on chain 1` (or several, comma-separated). */
export const describePaused = (tokens: ReadonlyArray<TokenStatus>): string => {
  const paused = tokens.filter((t) => t.paused);
  return paused.length === 0
    ? "ready"
    : `paused: ${paused.map((t) => `${t.symbol} on chain ${t.chainId}`).join(", ")}`;
};
