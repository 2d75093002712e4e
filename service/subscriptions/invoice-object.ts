/** An invoice as stored, and as the API shows it. */
import { Schema } from "effect";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import { formatDecimal } from "../money/decimal.ts";
import { INVOICE_LINE_KINDS } from "./invoice-math.ts";

export const INVOICE_STATUSES = ["open", "paid", "uncollectible", "void"] as const;

const StoredLine = Schema.Struct({
  kind: Schema.Literals(INVOICE_LINE_KINDS),
  description: Schema.String,
  quantity: Schema.Union([Schema.Number, Schema.String]),
  amount: Schema.String,
});

export const InvoiceRow = Schema.Struct({
  id: Schema.String,
  merchant_id: Schema.String,
  livemode: Schema.Boolean,
  subscription_id: Schema.String,
  customer: Schema.String,
  chain_id: Schema.Number,
  token_address: Schema.String,
  period: Schema.Number,
  period_start: Schema.Number,
  period_end: Schema.Number,
  status: Schema.Literals(INVOICE_STATUSES),
  lines: Schema.Array(StoredLine),
  subtotal: Schema.String,
  discount: Schema.String,
  total: Schema.String,
  amount_paid: Schema.String,
  amount_returned: Schema.String,
  returned_at: Schema.NullOr(Schema.Number),
  failure_code: Schema.NullOr(Schema.String),
  starting_credit: Schema.String,
  ending_credit: Schema.String,
  charge_id: Schema.NullOr(Schema.String),
  attempt_count: Schema.Number,
  next_attempt_at: Schema.NullOr(Schema.Number),
  first_failed_at: Schema.NullOr(Schema.Number),
  paid_at: Schema.NullOr(Schema.Number),
  created_at: Schema.Date,
});
export type InvoiceRow = typeof InvoiceRow.Type;

export const INVOICE_COLUMNS = `i.id, i.merchant_id, i.livemode, i.subscription_id, s.customer, s.chain_id,
  p.token_address, i.period, i.period_start::float8 AS period_start, i.period_end::float8 AS period_end, i.status,
  i.lines, i.subtotal::text AS subtotal, i.discount::text AS discount, i.total::text AS total,
  i.amount_paid::text AS amount_paid, i.amount_returned::text AS amount_returned,
  i.returned_at::float8 AS returned_at, i.failure_code, i.starting_credit::text AS starting_credit,
  i.ending_credit::text AS ending_credit, i.charge_id,
  i.attempt_count, i.next_attempt_at::float8 AS next_attempt_at, i.first_failed_at::float8 AS first_failed_at,
  i.paid_at::float8 AS paid_at, i.created_at`;
export const INVOICE_FROM = `billing.invoices i JOIN billing.subscriptions s ON s.id = i.subscription_id
  JOIN billing.prices p ON p.id = s.price_id`;

const Decimal = Schema.String.annotate({ description: "Decimal amount in the token's units" });

export const InvoiceObject = Schema.Struct({
  id: Schema.String.annotate({ description: "inv_…" }),
  object: Schema.Literal("invoice"),
  livemode: Schema.Boolean,
  status: Schema.Literals(INVOICE_STATUSES).annotate({
    description:
      "open: being collected (see attempt_count, next_payment_attempt), or paid in part by another charge of its period (amount_remaining_decimal; no retry), or its charge was returned (amount_returned_decimal; no retry); paid; uncollectible: every retry failed, or its period ended unpaid; void: the subscription was canceled before it was paid",
  }),
  subscription: Schema.String,
  customer: Schema.String,
  chain: Schema.Int,
  token: Schema.String,
  period: Schema.Int.annotate({ description: "The mandate's period index this invoice bills" }),
  period_start: Schema.Int,
  period_end: Schema.Int,
  lines: Schema.Array(
    Schema.Struct({
      kind: Schema.Literals(INVOICE_LINE_KINDS).annotate({
        description:
          "price (this period, in advance); usage (last period's, in arrears); discount; proration (a plan change: the old price's unused time credited, negative, or the new price's remaining time); credit (the subscription's credit taken off, negative, or what the lines leave below zero carried to the next invoices, positive)",
      }),
      description: Schema.String,
      quantity: Schema.String,
      amount_decimal: Schema.String.annotate({
        description: "Negative for a discount, a credit or unused time",
      }),
    }),
  ),
  subtotal_decimal: Decimal.annotate({
    description: "Price, usage and proration lines; negative when a downgrade's credit outweighs them",
  }),
  discount_decimal: Decimal,
  total_decimal: Decimal.annotate({ description: "What is charged: never negative" }),
  starting_credit_decimal: Decimal.annotate({ description: "The subscription's credit before this invoice" }),
  ending_credit_decimal: Decimal.annotate({ description: "Its credit after it, for the next invoices" }),
  amount_paid_decimal: Decimal.annotate({
    description:
      "What its charge paid towards it: the total once paid; part of it when another charge of the period paid less",
  }),
  amount_remaining_decimal: Decimal.annotate({ description: "total − amount_paid; 0 once paid" }),
  amount_returned_decimal: Decimal.annotate({
    description:
      "What its charge paid and the escrow then returned to the customer during the hold (the charge's whole amount); the invoice is then unpaid: amount_paid 0, failure_code charge_returned",
  }),
  returned_at: Schema.NullOr(Schema.Int).annotate({
    description: "Chain time (unix seconds) of its charge's return",
  }),
  failure_code: Schema.NullOr(Schema.String).annotate({
    description:
      "Why the latest attempt failed (the charge's failure_code; period_already_charged when another charge of the period paid less than the total; charge_returned when its charge was returned); null once paid",
  }),
  charge: Schema.NullOr(Schema.String).annotate({
    description: "The latest charge attempt, or the charge that took the invoice's period",
  }),
  attempt_count: Schema.Int,
  next_payment_attempt: Schema.NullOr(Schema.Int).annotate({
    description: "Chain time (unix seconds) of the next retry",
  }),
  paid_at: Schema.NullOr(Schema.Int),
  created: Schema.Int,
}).annotate({ identifier: "Invoice" });
export type InvoiceObject = typeof InvoiceObject.Type;

export const signedDecimal = (units: bigint, decimals: number) =>
  units < 0n ? `-${formatDecimal(-units, decimals)}` : formatDecimal(units, decimals);

export const toInvoiceObject = (row: InvoiceRow, chain: ResolvedChain | undefined): InvoiceObject => {
  const token = tokenOf(chain, row.token_address);
  const decimals = token?.decimals ?? 0;
  // A paid invoice got its total (a larger charge of the period is the charge's, not credited on).
  const paid = row.status === "paid" ? BigInt(row.total) : BigInt(row.amount_paid);
  return {
    id: row.id,
    object: "invoice",
    livemode: row.livemode,
    status: row.status,
    subscription: row.subscription_id,
    customer: row.customer,
    chain: row.chain_id,
    token: token?.symbol ?? row.token_address,
    period: row.period,
    period_start: row.period_start,
    period_end: row.period_end,
    lines: row.lines.map((line) => ({
      kind: line.kind,
      description: line.description,
      quantity: String(line.quantity),
      amount_decimal: signedDecimal(BigInt(line.amount), decimals),
    })),
    subtotal_decimal: signedDecimal(BigInt(row.subtotal), decimals),
    discount_decimal: formatDecimal(BigInt(row.discount), decimals),
    total_decimal: formatDecimal(BigInt(row.total), decimals),
    starting_credit_decimal: formatDecimal(BigInt(row.starting_credit), decimals),
    ending_credit_decimal: formatDecimal(BigInt(row.ending_credit), decimals),
    amount_paid_decimal: formatDecimal(paid, decimals),
    amount_remaining_decimal: formatDecimal(BigInt(row.total) - paid, decimals),
    amount_returned_decimal: formatDecimal(BigInt(row.amount_returned), decimals),
    returned_at: row.returned_at,
    failure_code: row.status === "paid" ? null : row.failure_code,
    charge: row.charge_id,
    attempt_count: row.attempt_count,
    next_payment_attempt: row.status === "open" ? row.next_attempt_at : null,
    paid_at: row.paid_at,
    created: Math.floor(row.created_at.getTime() / 1000),
  };
};
