/**
 * The relayer's account on each chain: the key (none: the service cannot send), signing, and the
 * broadcast of signed bytes. Shared by submissions (relayer.ts) and the tracker (relayer-tracker.ts).
 */
import { Context, Effect, Layer, Redacted, Schema } from "effect";
import { type Hex, keccak256 } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { ChainClients } from "./chain-clients.ts";
import type { ResolvedChain } from "./config.ts";

export class RelayerError extends Schema.TaggedError<RelayerError>()("RelayerError", {
  reason: Schema.Literals([
    "no_relayer_key",
    "unknown_chain",
    "simulation_failed",
    "rpc_failed",
    "budget_exhausted",
    "balance_below_floor",
  ]),
  message: Schema.String,
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

const make = (key: Redacted.Redacted<Hex> | undefined) =>
  Effect.gen(function* () {
    const clients = yield* ChainClients;
    const account = key ? privateKeyToAccount(Redacted.value(key)) : undefined;

    const rpc = <A>(what: string, f: () => Promise<A>) =>
      Effect.tryPromise({
        try: f,
        catch: (error) =>
          new RelayerError({ reason: "rpc_failed", message: `${what}: ${String(error).split("\n")[0]}` }),
      });

    const sign = (chain: ResolvedChain, tx: UnsignedTransaction) =>
      Effect.gen(function* () {
        if (!account)
          return yield* new RelayerError({
            reason: "no_relayer_key",
            message: "RELAYER_PRIVATE_KEY is not set",
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
      /** The account's address; undefined without a key. */
      address: account?.address,
      /** The address as stored (lower case). */
      from: account?.address.toLowerCase(),
      rpc,
      sign,
      broadcast,
    };
  });

export class RelayerAccount extends Context.Service<
  RelayerAccount,
  Effect.Success<ReturnType<typeof make>>
>()("RelayerAccount") {
  static readonly layer = (key: Redacted.Redacted<Hex> | undefined) =>
    Layer.effect(RelayerAccount, make(key));
}
