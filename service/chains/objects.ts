/** The API shapes of chain objects. Also the source of their OpenAPI schemas. */
import { Schema } from "effect";
import type { ResolvedChain } from "./config.ts";

export const TokenObject = Schema.Struct({
  symbol: Schema.String,
  address: Schema.String,
  decimals: Schema.Int,
}).annotate({ identifier: "Token" });
export type TokenObject = typeof TokenObject.Type;

export const ChainObject = Schema.Struct({
  object: Schema.Literal("chain"),
  id: Schema.Int.annotate({ description: "EIP-155 chain id" }),
  name: Schema.String,
  livemode: Schema.Boolean,
  subscriptions_available: Schema.Boolean.annotate({
    description:
      "True when mandates and subscriptions can be opened on this chain. Independent of escrow_available.",
  }),
  payments_available: Schema.Boolean.annotate({
    description:
      "True when one-time payments can be created on this chain. Independent of subscriptions_available and escrow_available.",
  }),
  escrow_available: Schema.Boolean.annotate({
    description: "Whether charges and payments on this chain are held in escrow before they reach you.",
  }),
  hold_seconds: Schema.Int.annotate({
    description: "How long a charge is held before release; 0 without escrow.",
  }),
  confirmations: Schema.Int.annotate({
    description: "Blocks a log must be buried under before it is reported.",
  }),
  escrow_contract: Schema.String.annotate({
    description: "Address of the MandateEscrow contract on this chain.",
  }),
  tokens: Schema.Array(TokenObject),
}).annotate({ identifier: "Chain" });
export type ChainObject = typeof ChainObject.Type;

export const toChainObject = (chain: ResolvedChain): ChainObject => ({
  object: "chain",
  id: chain.id,
  name: chain.name,
  livemode: chain.livemode,
  subscriptions_available: chain.subscriptions_available,
  payments_available: chain.payments_available,
  escrow_available: chain.escrow_available,
  hold_seconds: chain.hold_seconds,
  confirmations: chain.confirmations,
  escrow_contract: chain.escrow.address,
  tokens: chain.tokens.map(({ symbol, address, decimals }) => ({ symbol, address, decimals })),
});

export const MerchantChainObject = Schema.Struct({
  object: Schema.Literal("merchant_chain"),
  id: Schema.String,
  chain: Schema.Int,
  name: Schema.String,
  livemode: Schema.Boolean,
  subscriptions_available: Schema.Boolean,
  payments_available: Schema.Boolean,
  escrow_available: Schema.Boolean,
  payout_address: Schema.String.annotate({
    description: "Where this merchant's charges on the chain are paid out.",
  }),
  tokens: Schema.Array(TokenObject),
  created: Schema.Int.annotate({ description: "Unix seconds" }),
}).annotate({ identifier: "MerchantChain" });
export type MerchantChainObject = typeof MerchantChainObject.Type;

export const listOf = <S extends Schema.Top>(item: S, identifier: string) =>
  Schema.Struct({
    object: Schema.Literal("list"),
    data: Schema.Array(item),
    has_more: Schema.Boolean,
  }).annotate({ identifier });
