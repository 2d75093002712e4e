/**
 * The errors a hosted page shows, and the words of those both pages share: the wallet's refusals
 * while connecting and switching networks, a missing account or network, a failed first read.
 */
import { type ChainOutcome, chainMissingText, type PageChain, wrongNetworkText } from "./chain.ts";
import { errorMessage, walletFailure } from "./wallet.ts";

export type ErrorKind = "rejected" | "wrong_account" | "chain_missing" | "no_wallet" | "server" | "wallet";

/**
 * An error as the page shows it. `retry` is what "Try again" does: "reload" reads the session again,
 * the page's own values repeat one of its actions; null: there is no retry.
 */
export interface PageError<R extends string> {
  readonly kind: ErrorKind;
  readonly title: string;
  readonly message: string;
  readonly retry: "reload" | R | null;
}

export interface Words {
  readonly title: string;
  readonly message: string;
}

/** A failed wallet request: declined (in the step's words) or the wallet's own error. */
export const walletError = <R extends string>(
  error: unknown,
  declined: Words,
  retry: PageError<R>["retry"],
): PageError<R> => {
  const failure = walletFailure(error);
  return failure.kind === "rejected" ? { kind: "rejected", ...declined, retry } : { ...failure, retry };
};

export const CONNECT_DECLINED: Words = {
  title: "Wallet not connected",
  message: "You declined the connection request in your wallet.",
};

/** `purpose`: what the network is needed for ("authorize", "pay"). */
export const switchDeclined = (chain: PageChain, purpose: string): Words => ({
  title: "Network not switched",
  message: `You declined switching to ${chain.name}. Your wallet must be on ${chain.name} to ${purpose}.`,
});

/** No wallet in the browser; `message` says what the page needs one for. */
export const noWalletError = <R extends string>(
  message: string,
  retry: PageError<R>["retry"],
): PageError<R> => ({
  kind: "no_wallet",
  title: "No wallet found",
  message,
  retry,
});

export const noAccountError = <R extends string>(retry: PageError<R>["retry"]): PageError<R> => ({
  kind: "wallet",
  title: "No account",
  message: "Your wallet didn't share an account. Unlock it or create an account, then try again.",
  retry,
});

/** What putting the wallet on the page's chain came to, as an error; null when it is there. */
export const chainError = <R extends string>(
  outcome: ChainOutcome,
  chain: PageChain,
  purpose: string,
  retry: PageError<R>["retry"],
): PageError<R> | null => {
  switch (outcome.kind) {
    case "ok":
      return null;
    case "wallet_error":
      return walletError(outcome.error, switchDeclined(chain, purpose), retry);
    case "missing":
      return { kind: "chain_missing", ...chainMissingText(chain, outcome.addError), retry };
    case "still_other":
      return { kind: "wallet", ...wrongNetworkText(chain), retry };
  }
};

/** The service refused or failed a request, in the page's words. */
export const serviceError = <R extends string>(
  title: string,
  message: string,
  retry: PageError<R>["retry"],
): PageError<R> => ({ kind: "server", title, message, retry });

/** Anything the page did not expect: said as it is, and "Try again" reads the session again. */
export const unexpectedError = <R extends string>(error: unknown): PageError<R> => ({
  kind: "server",
  title: "Something went wrong",
  message: errorMessage(error),
  retry: "reload",
});

/** The first read of the session failed (`what`: "authorization", "payment"). */
export const loadError = <R extends string>(what: string, error: unknown): PageError<R> => ({
  kind: "server",
  title: `Couldn't load this ${what}`,
  message: errorMessage(error),
  retry: "reload",
});
