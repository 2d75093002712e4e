/**
 * Putting the wallet on the page's chain: switch to it, add it when the wallet doesn't know it (error
 * 4902) with the RPC URL the service offers, and check it took. Both hosted pages; each turns the
 * outcome into its own error.
 */
import { errorCode, errorMessage, UNRECOGNIZED_CHAIN, USER_REJECTED, type WalletActions } from "./wallet.ts";

/** The chain as the session describes it. */
export interface PageChain {
  readonly id: number;
  readonly name: string;
  readonly rpc_url: string | null;
  readonly native_currency: { readonly name: string; readonly symbol: string; readonly decimals: number };
}

export type ChainOutcome =
  | { readonly kind: "ok" }
  /** The wallet refused or failed a request (the page words it for its step). */
  | { readonly kind: "wallet_error"; readonly error: unknown }
  /** The wallet doesn't know the chain and it could not be added (no RPC URL: `addError` null). */
  | { readonly kind: "missing"; readonly addError: unknown }
  /** Every request succeeded, yet the wallet is on another chain. */
  | { readonly kind: "still_other" };

export const ensureChain = async (wallet: WalletActions, chain: PageChain): Promise<ChainOutcome> => {
  const target = chain.id;
  try {
    if ((await wallet.chainId()) === target) return { kind: "ok" };
  } catch (error) {
    return { kind: "wallet_error", error };
  }
  try {
    await wallet.switchChain(target);
  } catch (error) {
    if (errorCode(error) !== UNRECOGNIZED_CHAIN) return { kind: "wallet_error", error };
    if (chain.rpc_url === null) return { kind: "missing", addError: null };
    try {
      await wallet.addChain({
        id: target,
        name: chain.name,
        rpcUrl: chain.rpc_url,
        nativeCurrency: chain.native_currency,
      });
    } catch (addError) {
      return { kind: "missing", addError };
    }
    try {
      // Wallets usually switch to a chain they just added; some only add it.
      if ((await wallet.chainId()) !== target) await wallet.switchChain(target);
    } catch (switchError) {
      return { kind: "wallet_error", error: switchError };
    }
  }
  let now: number;
  try {
    now = await wallet.chainId();
  } catch (error) {
    return { kind: "wallet_error", error };
  }
  return now === target ? { kind: "ok" } : { kind: "still_other" };
};

/** "Add X to your wallet": the chain is unknown to the wallet and could not be added. */
export const chainMissingText = (chain: PageChain, addError: unknown) => {
  const name = `${chain.name} (chain ID ${chain.id})`;
  const why =
    addError === null
      ? `Your wallet doesn't know ${name}.`
      : errorCode(addError) === USER_REJECTED
        ? `Your wallet doesn't know ${name}, and adding it was declined.`
        : `Your wallet doesn't know ${name}, and couldn't add it: ${errorMessage(addError)}`;
  return {
    title: `Add ${chain.name} to your wallet`,
    message: `${why} Add this network to your wallet, then try again.`,
  };
};

export const wrongNetworkText = (chain: PageChain) => ({
  title: "Wrong network",
  message: `Your wallet is still on another network. Switch it to ${chain.name} (chain ID ${chain.id}), then try again.`,
});
