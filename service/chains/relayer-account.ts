/**
 * The relayer's account on each chain: its key (relayer-keys.ts; none: the service sends nothing there),
 * the operator new terms name there, signing, and the broadcast of signed bytes. Shared by submissions
 * (relayer.ts) and the tracker (relayer-tracker.ts).
 */
import { Context, Effect, Layer, Redacted, Schema } from "effect";
import { type Hex, keccak256 } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { ChainClients } from "./chain-clients.ts";
import type { ResolvedChain } from "./config.ts";
import { ChainRegistry } from "./registry.ts";
import { relayerKeysOf } from "./relayer-keys.ts";

export class RelayerError extends Schema.TaggedError<RelayerError>()("RelayerError", {
  reason: Schema.Literals([
    "no_relayer_key",
    "unknown_chain",
    "simulation_failed",
    "rpc_failed",
    "budget_exhausted",
    "merchant_share_exhausted",
    "balance_below_floor",
  ]),
  message: Schema.String,
  /** `merchant_share_exhausted`: the merchants whose share of the hourly budget this transaction would pass. */
  merchants: Schema.optionalKey(Schema.Array(Schema.String)),
  /** `merchant_share_exhausted`: seconds until enough of their spending has left the hour for it to fit. */
  retryAfterSeconds: Schema.optionalKey(Schema.Int),
}) {}

export interface UnsignedTransaction {
  readonly to: Hex;
  readonly data: Hex;
  readonly nonce: number;
  readonly gas: bigint;
  readonly maxFeePerGas: bigint;
  readonly maxPriorityFeePerGas: bigint;
}

/** A nodes' answer that means the bytes are already in its pool or already mined: not an error. */
const isBenignBroadcastError = (error: unknown) =>
  /already known|known transaction|nonce too low|already imported|transaction already exists/i.test(
    String(error),
  );

const make = (fallback: Redacted.Redacted<Hex> | undefined) =>
  Effect.gen(function* () {
    const clients = yield* ChainClients;
    const registry = yield* ChainRegistry;
    const keys = yield* relayerKeysOf(registry.all, fallback);
    const accounts = new Map(Array.from(keys, ([id, key]) => [id, privateKeyToAccount(Redacted.value(key))]));
    const accountOf = (chainId: number) => accounts.get(chainId);

    const rpc = <A>(what: string, f: () => Promise<A>) =>
      Effect.tryPromise({
        try: f,
        catch: (error) =>
          new RelayerError({ reason: "rpc_failed", message: `${what}: ${String(error).split("\n")[0]}` }),
      });

    const sign = (chain: ResolvedChain, tx: UnsignedTransaction) =>
      Effect.gen(function* () {
        const account = accountOf(chain.id);
        if (!account)
          return yield* new RelayerError({
            reason: "no_relayer_key",
            message: `no relayer key for chain ${chain.id} (RELAYER_PRIVATE_KEY, or the chain's relayer block)`,
          });
        const raw = yield* Effect.promise(() =>
          account.signTransaction({ type: "eip1559", chainId: chain.id, ...tx }),
        );
        return { raw, hash: keccak256(raw) };
      });

    /** Sends signed bytes; a node that is down now gets them again on the tracker's next pass. */
    const broadcast = (chain: ResolvedChain, raw: Hex) =>
      rpc("eth_sendRawTransaction", () =>
        clients.client(chain).sendRawTransaction({ serializedTransaction: raw }),
      ).pipe(
        Effect.asVoid,
        Effect.catchIf(
          (error) => isBenignBroadcastError(error.message),
          () => Effect.void,
        ),
        Effect.catch((error) => Effect.logWarning("broadcast failed; will retry", error.message)),
      );

    return {
      /** The relayer's address on the chain; undefined without a key there. */
      address: (chainId: number): Hex | undefined => accountOf(chainId)?.address,
      /** The same as stored (lower case). */
      from: (chainId: number): string | undefined => accountOf(chainId)?.address.toLowerCase(),
      /**
       * The operator new terms name on the chain: its `operator` (which names this relayer on chain),
       * else the relayer itself. Undefined without a relayer key: nothing could act for it.
       */
      operator: (chain: ResolvedChain): Hex | undefined => {
        const relayer = accountOf(chain.id)?.address;
        return relayer === undefined ? undefined : ((chain.operator as Hex | undefined) ?? relayer);
      },
      /**
       * The operators whose mandates and payments the relayer acts for on the chain: the chain's
       * `operator` and the relayer itself (terms made before an operator was configured name it).
       */
      actsFor: (chain: ResolvedChain, operator: string): boolean => {
        const relayer = accountOf(chain.id)?.address.toLowerCase();
        if (relayer === undefined) return false;
        const named = operator.toLowerCase();
        return named === relayer || named === chain.operator?.toLowerCase();
      },
      rpc,
      sign,
      broadcast,
    };
  });

export class RelayerAccount extends Context.Service<
  RelayerAccount,
  Effect.Success<ReturnType<typeof make>>
>()("RelayerAccount") {
  /** `fallback`: RELAYER_PRIVATE_KEY, the key of every chain whose config names no other. */
  static readonly layer = (fallback: Redacted.Redacted<Hex> | undefined) =>
    Layer.effect(RelayerAccount, make(fallback));
}
