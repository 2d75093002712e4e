import { createConfig } from "ponder";
import { loadIndexerChains, ponderChainName } from "./service/chains/indexer-chains.ts";

const chains = loadIndexerChains(process.env.CHAINS_CONFIG ?? "config/chains.json");
const chainNames = chains.map((chain) => ponderChainName(chain.id));

export default createConfig({
  database: { kind: "postgres", connectionString: process.env.DATABASE_URL },
  chains: Object.fromEntries(
    chains.map((chain) => [
      ponderChainName(chain.id),
      { id: chain.id, rpc: [...chain.rpc.http], ws: chain.rpc.ws, pollingInterval: 1_000 },
    ]),
  ),
  blocks: {
    // Every new block's number, hash and time: confirmations are counted and the test clock read from it.
    ChainHead: {
      chain: Object.fromEntries(chainNames.map((name) => [name, {}])),
      startBlock: "latest",
      interval: 1,
    },
  },
});
