/** What an API request answers when a chain or the relayer could not do its part: 503, retry later. */
import { Unavailable } from "../errors.ts";
import type { ChainUnavailable } from "./chain-clients.ts";
import { type RelayerError, relayerBudgetExhausted } from "./relayer.ts";

export const unavailable = (error: ChainUnavailable | RelayerError): Unavailable =>
  error._tag === "RelayerError" && error.reason === "budget_exhausted"
    ? relayerBudgetExhausted
    : new Unavailable({
        code: "chain_unavailable",
        message: `The chain did not answer (${error.message}). Nothing was changed; retry shortly.`,
      });

export const relayerUnavailable = (what: string) =>
  new Unavailable({
    code: "relayer_unavailable",
    message: `This service has no relayer key configured, so it cannot ${what}.`,
  });
