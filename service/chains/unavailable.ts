/** What an API request answers when a chain or the relayer could not do its part: 503, retry later. */
import { Unavailable } from "../errors.ts";
import type { ChainUnavailable } from "./chain-clients.ts";
import { type ResolvedChain, tokenOf } from "./config.ts";
import type { RelayerError } from "./relayer-account.ts";
import { relayerBudgetExhausted } from "./relayer-budget.ts";

/** 503 while the relayer's balance on the chain is below the chain's `gas.min_balance_wei`. */
export const relayerBalanceLow = new Unavailable({
  code: "relayer_balance_low",
  message:
    "This service's relayer account on the chain is below its minimum balance, so nothing was sent or recorded. Retry once the operator has topped it up.",
});

/** 503 with Retry-After while the merchant's share of the chain's hourly relayer budget is spent. */
export const relayerShareExhausted = (retryAfterSeconds: number) =>
  new Unavailable({
    code: "relayer_share_exhausted",
    message:
      "The gas this service's relayer spent on this merchant's transactions on the chain in the last hour has reached the merchant's share of its hourly budget, so nothing was sent or recorded. Retry after the time Retry-After gives.",
    retryAfterSeconds,
  });

export const unavailable = (error: ChainUnavailable | RelayerError): Unavailable =>
  error._tag === "RelayerError" && error.reason === "budget_exhausted"
    ? relayerBudgetExhausted
    : error._tag === "RelayerError" && error.reason === "merchant_share_exhausted"
      ? relayerShareExhausted(error.retryAfterSeconds ?? 60)
      : error._tag === "RelayerError" && error.reason === "balance_below_floor"
        ? relayerBalanceLow
        : new Unavailable({
            code: "chain_unavailable",
            message: `The chain did not answer (${error.message}). Nothing was changed; retry shortly.`,
          });

export const relayerUnavailable = (what: string) =>
  new Unavailable({
    code: "relayer_unavailable",
    message: `This service has no relayer key configured, so it cannot ${what}.`,
  });

/** 503 while a token's issuer has it paused: every transfer of it would revert, so nothing is sent. */
export const tokenPaused = (chain: ResolvedChain, token: string) => {
  const symbol = tokenOf(chain, token)?.symbol ?? "The token";
  return new Unavailable({
    code: "token_paused",
    message: `${symbol} (${token.toLowerCase()}) on chain ${chain.id} is paused by its issuer: no transfer of it can happen now, so nothing was sent or recorded. Retry once it is unpaused.`,
  });
};
