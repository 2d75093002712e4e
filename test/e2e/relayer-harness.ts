/**
 * The relayer on an anvil of a test's own and the stack's database: the same layers the service builds
 * (account, store, relayer) over one chain, with the process's metrics.
 */
import { type Duration, type Effect, Layer, ManagedRuntime, Redacted } from "effect";
import type { Hex } from "viem";
import { LOCAL_DEPLOYER_KEY } from "../../scripts/stack/local-chain.ts";
import { ChainClients } from "../../service/chains/chain-clients.ts";
import { ChainHeads } from "../../service/chains/chain-heads.ts";
import type { ResolvedChain } from "../../service/chains/config.ts";
import { GasCosts } from "../../service/chains/gas-costs.ts";
import { ChainRegistry } from "../../service/chains/registry.ts";
import { Relayer } from "../../service/chains/relayer.ts";
import { RelayerAccount } from "../../service/chains/relayer-account.ts";
import { RelayerStore } from "../../service/chains/relayer-store.ts";
import { trackPending } from "../../service/chains/relayer-tracker.ts";
import { databaseLayer } from "../../service/db/client.ts";
import { Metrics } from "../../service/metrics/metrics.ts";
import { stack } from "./helpers.ts";

/**
 * A test chain on an anvil of the test's own, whose one token is `token` (also named as the escrow,
 * which the relayer never calls), with `settings` (budget, share, gas) over the defaults.
 */
export const relayerTestChain = (
  id: number,
  name: string,
  http: string,
  token: Hex,
  settings: Partial<ResolvedChain> = {},
): ResolvedChain => ({
  id,
  name,
  livemode: false,
  rpc: { http: [http] },
  escrow: { address: token, start_block: 0 },
  tokens: [{ symbol: "USDC", decimals: 6, address: token }],
  subscriptions_available: true,
  payments_available: true,
  escrow_available: false,
  hold_seconds: 0,
  confirmations: 0,
  ...settings,
});

export const relayerLayer = (chain: ResolvedChain) => {
  const base = Layer.mergeAll(
    databaseLayer(stack().databaseUrl, 10),
    ChainHeads.layer().pipe(
      Layer.provideMerge(Layer.mergeAll(ChainRegistry.fromChains([chain]), ChainClients.layer)),
    ),
    Metrics.layer,
  );
  const parts = Layer.mergeAll(
    RelayerStore.layer,
    GasCosts.layer,
    RelayerAccount.layer(Redacted.make(LOCAL_DEPLOYER_KEY)),
  );
  return Relayer.layer.pipe(Layer.provideMerge(parts), Layer.provideMerge(base));
};

export type RelayerServices = Layer.Success<ReturnType<typeof relayerLayer>>;

/** One tracking pass, replacing transactions unmined for `bumpAfter`. */
export const track = (bumpAfter: Duration.Input) => trackPending(bumpAfter);

/** A runner of effects over one built relayer (one pool, one metrics registry). */
export const relayerRunner = (chain: ResolvedChain) => {
  const runtime = ManagedRuntime.make(relayerLayer(chain));
  return {
    run: <A, E>(effect: Effect.Effect<A, E, RelayerServices>) => runtime.runPromise(effect),
    dispose: () => runtime.dispose(),
  };
};
