/**
 * The API shape of `GET /v1/limits` (http/routes/limits.ts gathers its values): an API key's request
 * rates, and per chain of its mode the merchant's open payments and each token's smallest payment.
 */
import { Schema } from "effect";
import { REQUEST_CLASSES } from "./request-limits.ts";

const RateLimitObject = Schema.Struct({
  class: Schema.Literals(REQUEST_CLASSES).annotate({
    description: "reads: GET; writes: POST and DELETE; test_helpers: /v1/test/… (test mode)",
  }),
  limit: Schema.Int.annotate({ description: "Requests a second with this API key, and the largest burst" }),
  remaining: Schema.Int.annotate({ description: "Requests this key can send at once now (an estimate)" }),
  reset: Schema.Int.annotate({ description: "Seconds until remaining is back to limit" }),
}).annotate({ identifier: "RateLimit" });

const TokenMinimum = Schema.Struct({
  symbol: Schema.String,
  address: Schema.String,
  min_payment: Schema.String.annotate({ description: "The smallest payment's amount, in base units" }),
  min_payment_decimal: Schema.String.annotate({ description: "The same in the token's units" }),
}).annotate({ identifier: "TokenMinimum" });

const ChainLimits = Schema.Struct({
  chain: Schema.Int.annotate({ description: "EIP-155 chain id" }),
  open_payments: Schema.Int.annotate({
    description: "Your payments on the chain that are open (requires_payment or processing)",
  }),
  open_payments_limit: Schema.NullOr(Schema.Int).annotate({
    description: "Most open payments allowed at once on the chain; null: no limit",
  }),
  tokens: Schema.Array(TokenMinimum),
}).annotate({ identifier: "ChainLimits" });

export const LimitsObject = Schema.Struct({
  object: Schema.Literal("limits"),
  livemode: Schema.Boolean,
  rate_limits: Schema.Array(RateLimitObject).annotate({
    description: "The request rates of this key's classes of routes; a class without a limit is left out",
  }),
  chains: Schema.Array(ChainLimits),
}).annotate({ identifier: "Limits" });
export type LimitsObject = typeof LimitsObject.Type;
