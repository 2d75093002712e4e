/**
 * A month closed: the merchant's money per chain and token over the month in an IANA time zone (from
 * the ledger, balances/balance-store.ts) and the month's invoices by status. The month's bounds and
 * the zone's rules come from Postgres' time zone database, the one that dates everything else.
 */
import { Context, Effect, Layer, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { BalanceStore } from "../balances/balance-store.ts";
import { decodeRows } from "../db/rows.ts";
import { type InvalidRequest, invalidParam } from "../errors.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { InvoiceStore } from "../subscriptions/invoice-store.ts";
import type { PeriodInvoices, PeriodReportObject, PeriodReportQuery } from "./period-report-object.ts";

const decodeKnown = decodeRows(Schema.Struct({ known: Schema.Boolean }));
const decodeBounds = decodeRows(Schema.Struct({ start: Schema.Number, end: Schema.Number }));

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const ledger = yield* BalanceStore;
  const invoices = yield* InvoiceStore;

  /** The month's first instant and the next month's, in `zone`; undefined for a zone Postgres does not know. */
  const boundsOf = (month: string, zone: string) =>
    Effect.gen(function* () {
      const [year, number] = month.split("-").map(Number) as [number, number];
      // Asked first, apart: Postgres folds `AT TIME ZONE` of constants when it plans, so an unknown zone
      // fails the statement even in a branch that would not run.
      const [zoneRow] =
        yield* sql`SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = ${zone}) AS known`.pipe(
          Effect.flatMap(decodeKnown),
        );
      if (zoneRow?.known !== true) return undefined;
      const [row] = yield* sql`SELECT
          extract(epoch FROM make_timestamp(${year}, ${number}, 1, 0, 0, 0) AT TIME ZONE ${zone})::float8 AS start,
          extract(epoch FROM (make_timestamp(${year}, ${number}, 1, 0, 0, 0) + interval '1 month')
            AT TIME ZONE ${zone})::float8 AS end`.pipe(Effect.flatMap(decodeBounds));
      return row;
    });

  const report = (
    scope: MerchantScope,
    query: PeriodReportQuery,
  ): Effect.Effect<PeriodReportObject, InvalidRequest | SqlError.SqlError> =>
    Effect.gen(function* () {
      const zone = query.time_zone ?? "UTC";
      const bounds = yield* boundsOf(query.month, zone);
      if (bounds === undefined)
        return yield* Effect.fail(
          invalidParam(
            "time_zone",
            `Unknown time zone '${zone.slice(0, 64)}': give an IANA name (Europe/Berlin).`,
          ),
        );
      const balances = yield* ledger.periodTotals(scope, bounds.start, bounds.end);
      const invoiceRows = yield* invoices.periodTotals(scope, bounds.start, bounds.end);
      const byToken = new Map<string, { -readonly [K in keyof PeriodInvoices]: PeriodInvoices[K] }>();
      for (const row of invoiceRows) {
        const key = `${row.chain_id}:${row.token_address}`;
        const entry = byToken.get(key) ?? {
          chain: row.chain_id,
          token_address: row.token_address,
          paid: { count: 0, total: "0" },
          open: { count: 0, total: "0" },
          void: { count: 0, total: "0" },
          uncollectible: { count: 0, total: "0" },
          returned: { count: 0, amount: "0" },
        };
        entry[row.status] = { count: row.count, total: row.total };
        entry.returned = {
          count: entry.returned.count + row.returned_count,
          amount: (BigInt(entry.returned.amount) + BigInt(row.amount_returned)).toString(),
        };
        byToken.set(key, entry);
      }
      return {
        object: "period_report",
        livemode: scope.livemode,
        month: query.month,
        time_zone: zone,
        period_start: bounds.start,
        period_end: bounds.end,
        balances: balances
          .filter((row) => row.first_block !== null || row.opening_pending !== "0")
          .map((row) => ({
            chain: row.chain_id,
            currency: row.currency,
            token_address: row.token_address,
            opening_pending: row.opening_pending,
            charges_held: row.charges_held,
            payments_held: row.payments_held,
            released: row.released,
            returned: row.returned,
            closing_pending: row.closing_pending,
            charges_unheld: row.charges_unheld,
            payments_unheld: row.payments_unheld,
            available_in: row.available_in,
            gas_wei: row.gas_wei,
            gas_currency: row.gas_currency,
            first_block: row.first_block,
            last_block: row.last_block,
          })),
        invoices: [...byToken.values()],
      };
    });

  return { report };
});

export class PeriodReports extends Context.Service<PeriodReports>()("PeriodReports", { make }) {
  static readonly layer = Layer.effect(PeriodReports, make);
}
