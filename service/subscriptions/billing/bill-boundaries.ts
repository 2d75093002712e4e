/**
 * Step 4 of a billing round: period boundaries. A batch of due subscriptions is locked, each invoiced
 * for the period the chain is in (a period already invoiced keeps its invoice) and advanced with the
 * chain times of its next advance warnings. The invoices are charged together, then written in one
 * multi-row insert, each with its first attempt counted and its charge, as both are made in the same
 * transaction. A subscription whose mandate was revoked, or that was to end at this period's start,
 * ends instead.
 */
import { Array as Arr, Effect } from "effect";
import { periodIndexAt, periodStart } from "../../../src/ledger/period.ts";
import { newId } from "../../ids.ts";
import { type DiscountWindow, InvoiceDrafts } from "../invoice-draft.ts";
import type { InvoiceTotals } from "../invoice-math.ts";
import { InvoiceStore, type InvoiceToCharge } from "../invoice-store.ts";
import type { SubscriptionRow } from "../subscription-object.ts";
import { SubscriptionStore } from "../subscription-store.ts";
import { Subscriptions } from "../subscriptions.ts";
import { atRiskCheckAt, discountWarningAt } from "../warnings.ts";
import { collect, markPaid, recordFailures } from "./collection.ts";
import { BATCH, type BillingRound, DUE_PER_ROUND, inTransactions } from "./round.ts";

interface Draft {
  readonly row: SubscriptionRow;
  readonly id: string;
  readonly period: number;
  readonly totals: InvoiceTotals;
  readonly window: DiscountWindow;
}

/** Invoices each (locked) subscription for the period the chain is in, and charges the invoices together. */
const billPeriods = (round: BillingRound, rows: ReadonlyArray<SubscriptionRow>) =>
  Effect.gen(function* () {
    const subscriptions = yield* Subscriptions;
    const store = yield* SubscriptionStore;
    const invoices = yield* InvoiceStore;
    const drafts = yield* InvoiceDrafts;
    const written: Draft[] = [];
    for (const row of rows) {
      if (row.mandate_status === "revoked") {
        yield* subscriptions.end(row.id, "mandate_revoked");
        continue;
      }
      const period = periodIndexAt(row.anchor, round.now) ?? 0;
      if (row.cancel_at_period_end && row.current_period !== null && period > row.current_period) {
        yield* subscriptions.end(row.id, "requested");
        continue;
      }
      const price = yield* round.price(row.price_id);
      const { totals, window } = yield* drafts.draft({
        chain: round.chain,
        subscription: row,
        price,
        period,
      });
      written.push({ row, id: yield* newId("invoice"), period, totals, window });
    }
    if (!Arr.isReadonlyArrayNonEmpty(written)) return;
    const invoiced = yield* invoices.invoiced(
      written.map(({ row, period }) => ({ subscriptionId: row.id, period })),
    );
    const billed = written.filter(({ row, period }) => !invoiced.has(`${row.id}:${period}`));
    // Charged first, so that each invoice is written once, with its charge (the charges are only
    // broadcast once this transaction commits).
    const { charged, taken, failed } = yield* collect(
      billed
        .filter((d) => d.totals.total > 0n)
        .map(
          ({ row, id, period, totals }): InvoiceToCharge => ({
            id,
            merchantId: row.merchant_id,
            livemode: row.livemode,
            total: totals.total,
            mandateId: row.mandate_id,
            period,
          }),
        ),
    );
    const chargeOf = new Map(charged.map((c) => [c.invoice, { id: c.charge, pending: c.pending }] as const));
    yield* invoices.insertOpen(
      billed.map(({ row, id, period, totals }) => ({
        id,
        scope: { merchantId: row.merchant_id, livemode: row.livemode },
        subscriptionId: row.id,
        period,
        periodStart: periodStart(row.anchor, period),
        periodEnd: periodStart(row.anchor, period + 1),
        totals,
        attempted: totals.total > 0n,
        charge: chargeOf.get(id),
      })),
    );
    yield* store.advance(
      written.map(({ row, id, period, window }) => {
        const nextStart = periodStart(row.anchor, period + 1);
        return {
          id: row.id,
          period,
          nextBillingAt: nextStart,
          invoice: invoiced.has(`${row.id}:${period}`) ? null : id,
          discountStart: window.start,
          discountEnd: window.end,
          atRiskCheckAt: atRiskCheckAt(nextStart),
          discountWarningAt:
            window.end === period + 1 ? discountWarningAt(nextStart) : row.discount_warning_at,
        };
      }),
    );
    yield* markPaid(
      billed
        .filter((d) => d.totals.total === 0n)
        .map((d) => ({ invoice: d.id, subscription: d.row.id, paidAt: round.now })),
    );
    yield* invoices.linkCharges(taken);
    yield* recordFailures(round, failed);
  });

export const billBoundaries = (round: BillingRound) =>
  Effect.gen(function* () {
    const store = yield* SubscriptionStore;
    const ids = yield* store.due(round.chain.id, round.now, DUE_PER_ROUND, round.pausedTokens);
    yield* inTransactions(ids, (group) =>
      Effect.gen(function* () {
        yield* billPeriods(round, yield* store.lock(group, { kind: "billing_due", now: round.now }));
      }),
    );
    if (ids.length >= BATCH) yield* (yield* InvoiceStore).analyse;
    return ids.length === DUE_PER_ROUND;
  });
