/** Example of `GET /v1/limits`. */
import type { LimitsObject } from "../../limits/limits-object.ts";
import { CHAIN, USDC } from "./shared.ts";

export const limits: LimitsObject = {
  object: "limits",
  livemode: false,
  rate_limits: [
    { class: "reads", limit: 25, remaining: 24, reset: 1 },
    { class: "writes", limit: 25, remaining: 25, reset: 0 },
    { class: "test_helpers", limit: 10, remaining: 10, reset: 0 },
  ],
  chains: [
    {
      chain: CHAIN.id,
      open_payments: 3,
      open_payments_limit: 10_000,
      tokens: [
        { symbol: USDC.symbol, address: USDC.address, min_payment: "10000", min_payment_decimal: "0.01" },
      ],
    },
  ],
};
