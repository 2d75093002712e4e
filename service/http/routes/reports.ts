import { Effect } from "effect";
import { invalidParam } from "../../errors.ts";
import { PeriodReportObject, PeriodReportQuery } from "../../reports/period-report-object.ts";
import { PeriodReports } from "../../reports/period-reports.ts";
import { periodReport } from "../examples/balances.ts";
import { defineRoute } from "../route.ts";

export const reportRoutes = [
  defineRoute({
    method: "GET",
    path: "/v1/reports/period",
    operationId: "retrievePeriodReport",
    tag: "Balance",
    summary: "Retrieve a monthly report",
    description:
      "A month closed: your money per chain and token over a calendar month in a time zone, and its invoices. For each chain and token, what was held in escrow for you when the month began and ended, and every flow in between, from your balance transactions whose `created` (the block's time) falls in the month: `opening_pending + charges_held + payments_held − released − returned = closing_pending`, and `available_in = released + charges_unheld + payments_unheld` is what reached your payout address. `first_block` and `last_block` bound the month's movements, so the totals can be tied to the token's `Transfer` logs between them. Invoices of periods starting in the month are counted by status, and those whose charge was returned separately. A month not over yet reports up to now; a closed month reports the same every time, unless a reorganisation's reversal is recorded in it.",
    body: PeriodReportQuery,
    response: PeriodReportObject,
    examples: {
      response: periodReport,
      errors: [
        invalidParam("time_zone", "Unknown time zone 'Mars/Olympus': give an IANA name (Europe/Berlin)."),
      ],
    },
    handler: ({ caller, body }) =>
      Effect.flatMap(Effect.service(PeriodReports), (reports) => reports.report(caller, body)),
  }),
];
