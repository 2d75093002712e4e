/**
 * `GET /v1/limits`: what this API key may still do, gathered from the modules that enforce it: its
 * request rates (limits/request-limits.ts), and per chain of its mode the merchant's open payments against
 * their limit (payments/open-payments.ts) and each token's smallest payment (chains/config.ts).
 */
import { Effect } from "effect";
import { minPaymentUnits } from "../../chains/config.ts";
import { ChainRegistry } from "../../chains/registry.ts";
import { LimitsObject } from "../../limits/limits-object.ts";
import { type RequestClass, RequestLimits } from "../../limits/request-limits.ts";
import { formatDecimal } from "../../money/decimal.ts";
import { OpenPayments } from "../../payments/open-payments.ts";
import { limits } from "../examples/limits.ts";
import { defineRoute } from "../route.ts";

export const limitsRoutes = [
  defineRoute({
    method: "GET",
    path: "/v1/limits",
    operationId: "retrieveLimits",
    tag: "Limits",
    summary: "Retrieve your limits",
    description:
      "This API key's request rates, and per chain your open payments against their limit and each token's smallest payment. Every authenticated answer carries its class's rate in `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` and `RateLimit-Policy`; beyond it, 429 `rate_limited` with `Retry-After`. A payment below its token's minimum is 400 `amount_too_small`; one more open payment than the limit on a chain is 400 `open_payments_limit_reached`.",
    response: LimitsObject,
    examples: { response: limits },
    handler: ({ caller }) =>
      Effect.gen(function* () {
        const requestLimits = yield* RequestLimits;
        const chains = (yield* ChainRegistry).forMode(caller.livemode);
        const openPayments = yield* OpenPayments;
        const open = yield* openPayments.count(
          caller,
          chains.map((chain) => chain.id),
        );
        const classes: ReadonlyArray<RequestClass> = caller.livemode
          ? ["reads", "writes"]
          : ["reads", "writes", "test_helpers"];
        return {
          object: "limits" as const,
          livemode: caller.livemode,
          rate_limits: classes.flatMap((requestClass) => {
            const state = requestLimits.peek(caller.apiKeyId, caller.livemode, requestClass);
            return state === undefined
              ? []
              : [
                  {
                    class: requestClass,
                    limit: state.limit,
                    remaining: state.remaining,
                    reset: state.resetSeconds,
                  },
                ];
          }),
          chains: chains.map((chain) => ({
            chain: chain.id,
            open_payments: open.get(chain.id) ?? 0,
            open_payments_limit: openPayments.limit === 0 ? null : openPayments.limit,
            tokens: chain.tokens.map((token) => {
              const minimum = minPaymentUnits(token);
              return {
                symbol: token.symbol,
                address: token.address,
                min_payment: minimum.toString(),
                min_payment_decimal: formatDecimal(minimum, token.decimals),
              };
            }),
          })),
        };
      }),
  }),
];
