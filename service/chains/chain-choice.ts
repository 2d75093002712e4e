/**
 * Which of the merchant's configured chains and tokens a new mandate, price or test helper uses: the
 * one named, or the only one there is.
 */
import { Effect } from "effect";
import { type InvalidRequest, invalidParam } from "../errors.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import type { ResolvedChain } from "./config.ts";
import type { MerchantChainObject, TokenObject } from "./objects.ts";
import type { ChainRegistry } from "./registry.ts";

/** What the chain is chosen for: without `chain`, the only configured chain open to it is taken. */
export type ChainUse = "recurring" | "payments";

const openTo = (chain: ResolvedChain | undefined, use: ChainUse) =>
  use === "recurring" ? chain?.subscriptions_available === true : chain?.payments_available === true;

/** The merchant's chain configuration to use, from `chain` or the only one configured. */
export const chooseChain = (
  registry: ChainRegistry["Service"],
  scope: MerchantScope,
  configured: readonly MerchantChainObject[],
  requested: number | undefined,
  use: ChainUse = "recurring",
): Effect.Effect<{ chain: ResolvedChain; config: MerchantChainObject }, InvalidRequest> => {
  if (requested !== undefined) {
    const chain = registry.find(requested, scope.livemode);
    if (!chain)
      return Effect.fail(
        invalidParam(
          "chain",
          `No such ${scope.livemode ? "live" : "test"} chain: ${requested}. See GET /v1/chains.`,
          "chain_unknown",
        ),
      );
    const config = configured.find((c) => c.chain === requested);
    if (!config)
      return Effect.fail(
        invalidParam(
          "chain",
          `You have not configured chain ${requested}: set a payout address with POST /v1/merchant/chains first.`,
          "chain_not_configured",
        ),
      );
    return Effect.succeed({ chain, config });
  }
  if (configured.length === 0)
    return Effect.fail(
      invalidParam(
        "chain",
        "You have no chain configured in this mode: set a payout address with POST /v1/merchant/chains first.",
        "chain_not_configured",
      ),
    );
  // Without `chain`: the one configured chain open to this use.
  const open = configured.filter((c) => openTo(registry.find(c.chain, scope.livemode), use));
  const [only, ...others] = open.length > 0 ? open : configured;
  if (others.length > 0 || !only)
    return Effect.fail(
      invalidParam(
        "chain",
        `You have configured several chains (${open.map((c) => c.chain).join(", ")}): say which one with \`chain\`.`,
        "parameter_missing",
      ),
    );
  const chain = registry.find(only.chain, scope.livemode);
  return chain
    ? Effect.succeed({ chain, config: only })
    : Effect.fail(invalidParam("chain", `Chain ${only.chain} is no longer offered.`, "chain_unknown"));
};

/** The token to use on a configured chain: the one named (symbol or address), or the only one accepted. */
export const chooseToken = (
  config: MerchantChainObject,
  requested: string | undefined,
): Effect.Effect<TokenObject, InvalidRequest> => {
  if (requested !== undefined) {
    const wanted = requested.toLowerCase();
    const token = config.tokens.find(
      (t) => t.symbol.toLowerCase() === wanted || t.address.toLowerCase() === wanted,
    );
    return token
      ? Effect.succeed(token)
      : Effect.fail(
          invalidParam(
            "token",
            `You do not accept ${JSON.stringify(requested.slice(0, 60))} on chain ${config.chain}; you accept ${config.tokens.map((t) => t.symbol).join(", ")}.`,
            "token_unknown",
          ),
        );
  }
  const [only, ...others] = config.tokens;
  if (only && others.length === 0) return Effect.succeed(only);
  return Effect.fail(
    invalidParam(
      "token",
      `You accept several tokens on chain ${config.chain} (${config.tokens.map((t) => t.symbol).join(", ")}): say which one with \`token\`.`,
      "parameter_missing",
    ),
  );
};

/** Refuses a chain closed to recurring billing (its `subscriptions_available` is false). */
export const requireRecurringOpen = (chain: ResolvedChain, param: string, what: string) =>
  chain.subscriptions_available
    ? Effect.void
    : Effect.fail(
        invalidParam(
          param,
          `Recurring billing is closed on chain ${chain.id} (${chain.name})${what}: its subscriptions_available is false, so new mandates and subscriptions cannot be opened there. Existing mandates and subscriptions on it keep billing. Choose another chain from GET /v1/chains.`,
          "chain_closed",
        ),
      );

/** Refuses a chain closed to one-time payments (its `payments_available` is false). */
export const requirePaymentsOpen = (chain: ResolvedChain, param: string) =>
  chain.payments_available
    ? Effect.void
    : Effect.fail(
        invalidParam(
          param,
          `One-time payments are closed on chain ${chain.id} (${chain.name}): its payments_available is false, so new payments cannot be created there. Payments already created on it are still watched and settled. Choose another chain from GET /v1/chains.`,
          "chain_closed",
        ),
      );
