import { Effect } from "effect";
import {
  GasCostObject,
  GasCostTotalList,
  GasCostTotalsQuery,
  ListGasCostsQuery,
} from "../../chains/gas-cost-object.ts";
import { GasCosts } from "../../chains/gas-costs.ts";
import { listOf } from "../../chains/objects.ts";
import { invalidParam } from "../../errors.ts";
import { chargeGasCost, monthlyGasTotal } from "../examples/gas-costs.ts";
import { page } from "../examples/shared.ts";
import { defineRoute } from "../route.ts";

const withGasCosts = Effect.service(GasCosts);
const badRange = invalidParam("to", "`to` must not be earlier than `from`.");

export const gasCostRoutes = [
  defineRoute({
    method: "GET",
    path: "/v1/gas_costs",
    operationId: "listGasCosts",
    tag: "Gas costs",
    summary: "List gas costs",
    description:
      "The gas the service paid on chain for your objects, newest first: one entry per object a transaction carried. Every relayer transaction that was mined or reverted (a revert costs gas too) costs gas used × effective gas price, plus the L1 data fee on an OP-stack chain. A transaction that carried several objects (a batch of charges, a sweep of deposit addresses, a group of authorizations) is split between them in whole wei that sum to its total, the first objects by id taking one wei more until the remainder is used up. A replaced transaction that was never mined costs nothing. Filter by chain, by object (`source`), by `kind` and by `created` (`from`, `to`: unix seconds).",
    body: ListGasCostsQuery,
    response: listOf(GasCostObject, "GasCostList"),
    examples: { response: page(chargeGasCost), errors: [badRange] },
    handler: ({ caller, body }) => Effect.flatMap(withGasCosts, (costs) => costs.list(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/gas_cost_totals",
    operationId: "listGasCostTotals",
    tag: "Gas costs",
    summary: "List monthly gas cost totals",
    description:
      "Your gas costs (`GET /v1/gas_costs`) summed per calendar month (UTC) of `created` and chain, newest month first, in wei of each chain's native currency. Filter by chain and by `created` (`from`, `to`: unix seconds).",
    body: GasCostTotalsQuery,
    response: GasCostTotalList,
    examples: { response: { object: "list", data: [monthlyGasTotal], has_more: false }, errors: [badRange] },
    handler: ({ caller, body }) => Effect.flatMap(withGasCosts, (costs) => costs.monthlyTotals(caller, body)),
  }),
];
