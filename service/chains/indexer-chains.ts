/**
 * What the indexer needs from the chain config: the resolved chains, keyed by Ponder chain name.
 * Used by ponder.config.ts (Ponder hashes the resulting config object into its build id).
 */
import { Effect } from "effect";
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
