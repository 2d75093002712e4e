/**
 * The configured chains, loaded once at start from the resolved chains file. Read-only at run
 * time: an operator changes chains by editing config and restarting.
 */
import { Context, Effect, Layer } from "effect";
import { type ChainConfigError, loadChainsFile, type ResolvedChain, requireResolved } from "./config.ts";

export class ChainRegistry extends Context.Service<
  ChainRegistry,
  {
    readonly all: readonly ResolvedChain[];
    /** Chains a key of this mode may use: test keys see test chains, live keys live chains. */
    readonly forMode: (livemode: boolean) => readonly ResolvedChain[];
    readonly find: (id: number, livemode: boolean) => ResolvedChain | undefined;
    /** Any configured chain by id, whatever its mode (records already name their chain). */
    readonly byId: (id: number | bigint) => ResolvedChain | undefined;
  }
>()("ChainRegistry") {
  static readonly fromChains = (chains: readonly ResolvedChain[]) =>
    Layer.succeed(ChainRegistry, {
      all: chains,
      forMode: (livemode) => chains.filter((chain) => chain.livemode === livemode),
      find: (id, livemode) => chains.find((chain) => chain.id === id && chain.livemode === livemode),
      byId: (id) => chains.find((chain) => chain.id === Number(id)),
    });

  static readonly fromFile = (path: string): Layer.Layer<ChainRegistry, ChainConfigError> =>
    Layer.unwrap(
      loadChainsFile(path).pipe(
        Effect.flatMap((file) => requireResolved(file, path)),
        Effect.map(ChainRegistry.fromChains),
      ),
    );
}
