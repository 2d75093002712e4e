import { createConfig } from "ponder";
import { MandateEscrowAbi } from "./abis/MandateEscrow.ts";
import { loadIndexerChains, ponderChainName, verifyIndexerChains } from "./service/chains/indexer-chains.ts";
import { chainTransport } from "./service/chains/rpc-transport.ts";

const chains = loadIndexerChains(process.env.CHAINS_CONFIG ?? "config/chains.json");
// Chains that are not local must be the ones configured (RPC, escrow code, tokens, start block).
await verifyIndexerChains(chains);
const perChain = <T>(value: (chain: (typeof chains)[number]) => T) =>
  Object.fromEntries(chains.map((chain) => [ponderChainName(chain.id), value(chain)]));

export default createConfig({
  database: { kind: "postgres", connectionString: process.env.DATABASE_URL },
  chains: perChain((chain) => ({
    id: chain.id,
    // Several URLs: our transport, which keeps to one healthy URL and sets aside one whose head lags
    // (Ponder's own balancing spreads calls over all of them, and a lower "latest" from a lagging one
    // is a reorg to it). One URL: Ponder's own client, with its adaptive rate limit.
    rpc:
      chain.rpc.http.length > 1
        ? chainTransport(chain, {
            onLag: (change) =>
              console.warn(
                `chain ${change.chainId}: RPC URL #${change.index} (${change.host}) ${change.lagging ? "set aside, its head trails the others" : "in use again"} (head ${change.head}, best ${change.best})`,
              ),
          }).transport
        : [...chain.rpc.http],
    ws: chain.rpc.ws,
    pollingInterval: 1_000,
  })),
  contracts: {
    MandateEscrow: {
      abi: MandateEscrowAbi,
      chain: perChain((chain) => ({ address: chain.escrow.address, startBlock: chain.escrow.start_block })),
    },
  },
  blocks: {
    // Every new block's number, hash and time: confirmations are counted and the test clock read from it.
    ChainHead: { chain: perChain(() => ({})), startBlock: "latest", interval: 1 },
  },
});
