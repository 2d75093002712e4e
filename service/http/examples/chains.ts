/** Examples of the chain routes. */
import type { ConfigureMerchantChain } from "../../chains/merchant-chains.ts";
import type { ChainObject, MerchantChainObject } from "../../chains/objects.ts";
import { at, CHAIN, ESCROW, HOLD_SECONDS, IDS, PAYOUT_ADDRESS, USDC } from "./shared.ts";

export const chain: ChainObject = {
  object: "chain",
  id: CHAIN.id,
  name: CHAIN.name,
  livemode: false,
  subscriptions_available: true,
  payments_available: true,
  escrow_available: true,
  hold_seconds: HOLD_SECONDS,
  confirmations: 0,
  escrow_contract: ESCROW,
  tokens: [USDC],
};

export const configureMerchantChain: ConfigureMerchantChain = {
  chain: CHAIN.id,
  payout_address: PAYOUT_ADDRESS,
  tokens: ["USDC"],
};

export const merchantChain: MerchantChainObject = {
  object: "merchant_chain",
  id: IDS.merchantChain,
  chain: CHAIN.id,
  name: CHAIN.name,
  livemode: false,
  subscriptions_available: true,
  payments_available: true,
  escrow_available: true,
  payout_address: PAYOUT_ADDRESS,
  tokens: [USDC],
  created: at(0),
};
