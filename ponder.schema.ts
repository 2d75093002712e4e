import { onchainTable } from "ponder";

/** The newest indexed block of each chain. */
export const chainHead = onchainTable("chain_head", (t) => ({
  chainId: t.integer().primaryKey(),
  blockNumber: t.bigint().notNull(),
  blockHash: t.hex().notNull(),
  timestamp: t.bigint().notNull(),
}));
