import { Effect } from "effect";
import {
  Reconciliation,
  ReconciliationPage,
  ReconciliationQuery,
  toCsv,
} from "../../reconciliation/reconciliation.ts";
import { defineRoute } from "../route.ts";

export const reconciliationRoutes = [
  defineRoute({
    method: "GET",
    path: "/v1/reconciliation",
    operationId: "listReconciliation",
    tag: "Reconciliation",
    summary:
      "Every charge, release and return of this merchant's mandates, with chain references and exact amounts.",
    description:
      "Ordered by chain, block and log index. Filter by chain, block range and block time; page with limit and starting_after. `format=csv` returns the same entries as CSV.",
    body: ReconciliationQuery,
    response: ReconciliationPage,
    handler: ({ caller, body }) =>
      Effect.flatMap(Effect.service(Reconciliation), (reconciliation) =>
        Effect.map(reconciliation.list(caller, body), (page) => ({ ...page, format: body.format ?? "json" })),
      ),
    render: (value) => {
      const { format, ...page } = value as ReconciliationPage & { format: string };
      return format === "csv"
        ? { contentType: "text/csv; charset=utf-8", body: toCsv(page.data) }
        : { contentType: "application/json; charset=utf-8", body: JSON.stringify(page) };
    },
  }),
];
