import { Effect } from "effect";
import { ConfigureMerchantChain, MerchantChains } from "../../chains/merchant-chains.ts";
import { ChainObject, listOf, MerchantChainObject, toChainObject } from "../../chains/objects.ts";
import { ChainRegistry } from "../../chains/registry.ts";
import { InvalidRequest } from "../../errors.ts";
import { chain, configureMerchantChain, merchantChain } from "../examples/chains.ts";
import { page } from "../examples/shared.ts";
import { defineRoute } from "../route.ts";

const list = <A>(data: readonly A[]) => ({ object: "list" as const, data, has_more: false });

export const chainRoutes = [
  defineRoute({
    method: "GET",
    path: "/v1/chains",
    operationId: "listChains",
    tag: "Chains",
    summary: "List chains",
    description:
      "Every chain of this key's mode, with `subscriptions_available`, `payments_available` and `escrow_available`.",
    response: listOf(ChainObject, "ChainList"),
    examples: { response: page(chain) },
    handler: ({ caller }) =>
      Effect.map(Effect.service(ChainRegistry), (registry) =>
        list(registry.forMode(caller.livemode).map(toChainObject)),
      ),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/merchant/chains",
    operationId: "listMerchantChains",
    tag: "Chains",
    summary: "List configured chains",
    description:
      "The chains this merchant has configured, with `subscriptions_available`, `payments_available` and the payout address.",
    response: listOf(MerchantChainObject, "MerchantChainList"),
    examples: { response: page(merchantChain) },
    handler: ({ caller }) =>
      Effect.flatMap(Effect.service(MerchantChains), (merchantChains) =>
        Effect.map(merchantChains.list(caller), (data) => list(data)),
      ),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/merchant/chains",
    operationId: "configureMerchantChain",
    tag: "Chains",
    summary: "Configure a chain",
    description:
      "Sets this merchant's payout address and accepted tokens on a chain. Replaces the merchant's current configuration of that chain; earlier configurations are kept for audit. Mandates keep the payee they were signed with.",
    body: ConfigureMerchantChain,
    response: MerchantChainObject,
    status: 200,
    examples: {
      request: configureMerchantChain,
      response: merchantChain,
      errors: [
        new InvalidRequest({
          code: "payout_address_in_use",
          message:
            "This payout address belongs to another merchant on this chain. Use an address of your own.",
          param: "payout_address",
        }),
        new InvalidRequest({
          code: "chain_unknown",
          message: "No such test chain: 8453. See GET /v1/chains.",
          param: "chain",
        }),
      ],
    },
    handler: ({ caller, body }) =>
      Effect.flatMap(Effect.service(MerchantChains), (merchantChains) =>
        merchantChains.configure(caller, body),
      ),
  }),
];
