/** The API shapes of gas costs (`GET /v1/gas_costs`, `GET /v1/gas_cost_totals`) and their queries. */
import { Schema } from "effect";
import { ID_PATTERN } from "../ids.ts";
import { PageQuery } from "../pagination.ts";
import { ChainId, UnixSeconds } from "../query-fields.ts";

/** What a relayer transaction did for the object it carried (the caller names it when it submits). */
export const GAS_KINDS = [
  "charge",
  "release",
  "return",
  "sweep",
  "payment_release",
  "payment_return",
  "gasless_transfer",
  "authorization",
  "revocation",
  "cap_lowering",
  "wallet_deployment",
  "test_funding",
] as const;
export type GasKind = (typeof GAS_KINDS)[number];

export const GAS_SOURCE_TYPES = ["charge", "payment", "mandate"] as const;
export type GasSourceType = (typeof GAS_SOURCE_TYPES)[number];

const Wei = (description: string) =>
  Schema.String.annotate({
    description: `${description}, in wei (base units of the chain's native currency)`,
  });

export const GasCostObject = Schema.Struct({
  id: Schema.String.annotate({ description: "gc_…" }),
  object: Schema.Literal("gas_cost"),
  livemode: Schema.Boolean,
  created: Schema.Int.annotate({ description: "Unix seconds: when the transaction's receipt was recorded" }),
  chain: Schema.Int,
  native_currency: Schema.String.annotate({ description: "The symbol of the coin the gas was paid in" }),
  amount_wei: Wei("This object's share of the transaction's cost"),
  kind: Schema.Literals(GAS_KINDS),
  source: Schema.String.annotate({
    description: "The id of the object the transaction carried (ch_…, pay_…, mdt_…)",
  }),
  source_type: Schema.Literals(GAS_SOURCE_TYPES),
  transaction: Schema.Struct({
    hash: Schema.String,
    block_number: Schema.Int,
    status: Schema.Literals(["mined", "reverted"]).annotate({
      description: "A reverted transaction costs gas too",
    }),
    gas_used: Schema.String,
    effective_gas_price: Wei("Price per gas paid"),
    l1_fee_wei: Wei("The L1 data fee of an OP-stack chain (0 elsewhere)"),
    total_wei: Wei("gas_used × effective_gas_price + l1_fee_wei"),
    objects: Schema.Int.annotate({
      description:
        "How many objects the transaction carried; the total is split over them evenly, the first ones by id taking a wei more until the remainder is used up",
    }),
  }).annotate({ identifier: "GasCostTransaction" }),
}).annotate({ identifier: "GasCost" });
export type GasCostObject = typeof GasCostObject.Type;

const TimeRange = {
  chain: Schema.optionalKey(ChainId.annotate({ description: "Only this chain (EIP-155 id)" })),
  from: Schema.optionalKey(
    UnixSeconds.annotate({ description: "Earliest `created`, unix seconds, inclusive" }),
  ),
  to: Schema.optionalKey(UnixSeconds.annotate({ description: "Latest `created`, unix seconds, exclusive" })),
};

export const ListGasCostsQuery = Schema.Struct({
  ...PageQuery.fields,
  ...TimeRange,
  source: Schema.optionalKey(
    Schema.String.check(Schema.isPattern(ID_PATTERN)).annotate({
      description: "Only the costs of this object (a charge, payment or mandate id)",
    }),
  ),
  kind: Schema.optionalKey(Schema.Literals(GAS_KINDS)),
}).annotate({ identifier: "ListGasCostsQuery" });
export type ListGasCostsQuery = typeof ListGasCostsQuery.Type;

export const GasCostTotalsQuery = Schema.Struct(TimeRange).annotate({ identifier: "GasCostTotalsQuery" });
export type GasCostTotalsQuery = typeof GasCostTotalsQuery.Type;

export const GasCostTotalObject = Schema.Struct({
  object: Schema.Literal("gas_cost_total"),
  livemode: Schema.Boolean,
  month: Schema.String.annotate({ description: "The calendar month (UTC) of `created`, YYYY-MM" }),
  chain: Schema.Int,
  native_currency: Schema.String,
  amount_wei: Wei("The sum of the month's gas costs on the chain"),
  count: Schema.Int.annotate({ description: "How many gas costs (objects carried) it sums" }),
}).annotate({ identifier: "GasCostTotal" });
export type GasCostTotalObject = typeof GasCostTotalObject.Type;

export const GasCostTotalList = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(GasCostTotalObject),
  has_more: Schema.Boolean,
}).annotate({ identifier: "GasCostTotalList" });
export type GasCostTotalList = typeof GasCostTotalList.Type;
