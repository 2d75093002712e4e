/**
 * What the indexer needs from the chain config: the resolved chains, keyed by Ponder chain name.
 * Used by ponder.config.ts (Ponder hashes the resulting config object into its build id).
 */
import { Effect } from "effect";
import { verifyChains } from "./chain-verification.ts";
import { loadChainsFile, type ResolvedChain, requireResolved } from "./config.ts";

export const ponderChainName = (chainId: number): string => `chain_${chainId}`;

export const loadIndexerChains = (path: string): ResolvedChain[] => {
  const result = Effect.runSync(
    Effect.result(loadChainsFile(path).pipe(Effect.flatMap((file) => requireResolved(file, path)))),
  );
  // Ponder's config loader reports a thrown error with its message: the operator sees the bad field.
  if (result._tag === "Failure") throw new Error(result.failure.message);
  return result.success;
};

/**
 * The start checks of every chain that is not local (chain-verification.ts), minus the relayer's key,
 * which the indexer does not hold. On a problem Ponder is only loading its config (nothing is open yet):
 * the lines are printed and the process exits 2, as the service does, without Ponder's stack traces.
 */
export const verifyIndexerChains = async (chains: readonly ResolvedChain[]): Promise<void> => {
  const result = await Effect.runPromise(Effect.result(verifyChains(chains)));
  if (result._tag === "Failure") {
    console.error(`Refusing to start:\n${result.failure.message}`);
    process.exit(2);
  }
};
