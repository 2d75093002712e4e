import { Effect } from "effect";
import {
  Reconciliation,
  ReconciliationPage,
  ReconciliationQuery,
} from "../../reconciliation/reconciliation.ts";
import { reconciliationEntry } from "../examples/reconciliation.ts";
import { page } from "../examples/shared.ts";
import { defineRoute } from "../route.ts";

export const reconciliationRoutes = [
  defineRoute({
    method: "GET",
    path: "/v1/reconciliation",
    operationId: "listReconciliation",
    tag: "Reconciliation",
    summary: "List reconciliation entries",
    description:
      "Every charge, release and return of this merchant's mandates, with chain references and exact amounts. Ordered by chain, block and log index. Filter by chain, block range and block time; page with limit and starting_after. `format=csv` or `format=json` downloads every entry matching the filters instead, streamed from the server however many there are (CSV columns: docs/exports.md).",
    body: ReconciliationQuery,
    response: ReconciliationPage,
    examples: { response: page(reconciliationEntry) },
    handler: ({ caller, body }) =>
      Effect.flatMap(Effect.service(Reconciliation), (reconciliation) => reconciliation.list(caller, body)),
    download: ({ caller, body }) =>
      Effect.flatMap(Effect.service(Reconciliation), (reconciliation) =>
        reconciliation.download(caller, body),
      ),
  }),
];
