/** The API shape of a period close (`GET /v1/reports/period`) and its query. */
import { Schema } from "effect";
import { Units } from "../balances/balance-transaction-object.ts";

export const PeriodReportQuery = Schema.Struct({
  month: Schema.String.check(Schema.isPattern(/^(19[7-9]\d|[2-9]\d{3})-(0[1-9]|1[0-2])$/)).annotate({
    description: "The calendar month, YYYY-MM (from 1970-01)",
  }),
  time_zone: Schema.optionalKey(
    Schema.String.check(Schema.isMaxLength(64)).annotate({
      description: "The IANA time zone the month is taken in (Europe/Berlin); default UTC",
    }),
  ),
}).annotate({ identifier: "PeriodReportQuery" });
export type PeriodReportQuery = typeof PeriodReportQuery.Type;

const PeriodBalance = Schema.Struct({
  chain: Schema.Int,
  currency: Schema.String.annotate({ description: "Token symbol" }),
  token_address: Schema.String,
  opening_pending: Units("Held in escrow for you when the period began"),
  charges_held: Units("Charges into a hold"),
  payments_held: Units("Payments swept into a hold"),
  released: Units("Holds paid out to you (charges' and payments')"),
  returned: Units("Holds given back to customers (charges' and payments')"),
  closing_pending: Units(
    "Held in escrow for you when the period ended: opening_pending + charges_held + payments_held − released − returned",
  ),
  charges_unheld: Units("Charges paid straight to you"),
  payments_unheld: Units("Payments swept straight to you"),
  available_in: Units(
    "What reached your payout address in the period: released + charges_unheld + payments_unheld",
  ),
  gas_wei: Schema.String.annotate({
    description:
      "The gas the service's relayer paid for the period's movements of this token, in wei of the chain's native currency (paid by the service, not from your balance)",
  }),
  gas_currency: Schema.NullOr(Schema.String).annotate({
    description: "The native currency's symbol (null: no gas)",
  }),
  first_block: Schema.NullOr(Schema.Int).annotate({
    description: "The block of the period's first movement (null: none)",
  }),
  last_block: Schema.NullOr(Schema.Int).annotate({ description: "The block of the period's last movement" }),
}).annotate({ identifier: "PeriodBalance" });
export type PeriodBalance = typeof PeriodBalance.Type;

const InvoiceTotal = Schema.Struct({
  count: Schema.Int,
  total: Units("The sum of their totals"),
}).annotate({ identifier: "PeriodInvoiceTotal" });

const PeriodInvoices = Schema.Struct({
  chain: Schema.Int,
  token_address: Schema.String,
  paid: InvoiceTotal,
  open: InvoiceTotal,
  void: InvoiceTotal,
  uncollectible: InvoiceTotal,
  returned: Schema.Struct({
    count: Schema.Int.annotate({ description: "Invoices whose charge was returned (any status now)" }),
    amount: Units("What went back to customers of them"),
  }).annotate({ identifier: "PeriodInvoiceReturns" }),
}).annotate({ identifier: "PeriodInvoices" });
export type PeriodInvoices = typeof PeriodInvoices.Type;

export const PeriodReportObject = Schema.Struct({
  object: Schema.Literal("period_report"),
  livemode: Schema.Boolean,
  month: Schema.String,
  time_zone: Schema.String,
  period_start: Schema.Int.annotate({
    description: "Unix seconds: the month's first instant in the time zone",
  }),
  period_end: Schema.Int.annotate({
    description: "Unix seconds: the next month's first instant (exclusive)",
  }),
  balances: Schema.Array(PeriodBalance).annotate({
    description:
      "Per chain and token, from your balance transactions whose `created` (block time) falls in the period; reversals count where they were recorded",
  }),
  invoices: Schema.Array(PeriodInvoices).annotate({
    description: "Per chain and token, your invoices of periods starting in the month, by status now",
  }),
}).annotate({ identifier: "PeriodReport" });
export type PeriodReportObject = typeof PeriodReportObject.Type;
