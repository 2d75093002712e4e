/**
 * Step 5 of a billing round: period boundaries. A batch of due subscriptions is locked, each invoiced
 * for the period the chain is in (a period already invoiced keeps its invoice) and advanced with the
 * chain times of its next advance warnings. The invoices are charged together, then written in one
 * multi-row insert, each with its first attempt counted and its charge, as both are made in the same
 * transaction. A subscription whose mandate was revoked, or that was to end at this period's start,
 * ends instead; a change scheduled for the boundary is made first (plan-changes.ts). The invoice takes
 * the proration lines waiting and the subscription's credit, and leaves the credit that remains.
 *
 * A batch is billed in set statements, about a dozen whatever its size: the subscriptions locked in id
 * order with their mandate terms, the mandates and their periods' charges read together by the charge
 * engine, one multi-row insert of invoices, one update of the subscriptions from a recordset. The charges
 * are recorded in the same transaction and broadcast after it commits, so nothing can give them an
 * outcome before their invoices exist. Updates joined to a recordset also name their ids as an `= ANY`
 * array: without it Postgres planned them as sequential scans of the whole table.
 */
import { Array as Arr, Effect } from "effect";
import { periodIndexAt, periodStart } from "../../../src/ledger/period.ts";
import { newId } from "../../ids.ts";
import { type DiscountWindow, InvoiceDrafts } from "../invoice-draft.ts";
import type { InvoiceTotals } from "../invoice-math.ts";
import { InvoiceStore, type InvoiceToCharge } from "../invoice-store.ts";
import { PlanChanges } from "../plan-changes.ts";
import type { PriceRow } from "../prices.ts";
import type { PauseBehavior, SubscriptionRow } from "../subscription-object.ts";
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
  readonly paused: PauseBehavior | null;
}

/** Invoices each (locked) subscription for the period the chain is in, and charges the invoices together. */
const billPeriods = (round: BillingRound, rows: ReadonlyArray<SubscriptionRow>) =>
  Effect.gen(function* () {
    const subscriptions = yield* Subscriptions;
    const store = yield* SubscriptionStore;
    const invoices = yield* InvoiceStore;
    const drafts = yield* InvoiceDrafts;
    const planChanges = yield* PlanChanges;
    const due: { row: SubscriptionRow; period: number; paused: PauseBehavior | null; price: PriceRow }[] = [];
    for (const locked of rows) {
      if (locked.mandate_status === "revoked") {
        yield* subscriptions.end(locked.id, "mandate_revoked");
        continue;
      }
      const period = periodIndexAt(locked.anchor, round.now) ?? 0;
      // A trial canceled at its end ends there, with nothing charged.
      const ending =
        locked.current_period === null ? locked.status === "trialing" : period > locked.current_period;
      if (locked.cancel_at_period_end && ending) {
        yield* subscriptions.end(locked.id, "requested");
        continue;
      }
      // A change scheduled for this boundary is made before the period is invoiced.
      const row = yield* planChanges.atBoundary(round.chain, locked, round.now);
      due.push({ row, period, paused: row.pause_behavior, price: yield* round.price(row.price_id) });
    }
    // Paused: the period's invoice is written void or uncollectible, uncharged; the prorations and the
    // credit wait for the first invoice collected after the pause.
    const drafted = yield* drafts.draftMany(
      due.map(({ row, period, paused, price }) => ({
        chain: round.chain,
        subscription: paused === null ? row : { ...row, prorations: [], credit_balance: "0" },
        price,
        period,
      })),
    );
    const written: Draft[] = [];
    for (const [i, { row, period, paused }] of due.entries()) {
      const draft = drafted[i];
      if (draft !== undefined)
        written.push({
          row,
          id: yield* newId("invoice"),
          period,
          totals: draft.totals,
          window: draft.window,
          paused,
        });
    }
    if (!Arr.isReadonlyArrayNonEmpty(written)) return;
    const invoiced = yield* invoices.invoiced(
      written.map(({ row, period }) => ({ subscriptionId: row.id, period })),
    );
    const billed = written.filter(({ row, period }) => !invoiced.has(`${row.id}:${period}`));
    const collected = billed.filter((d) => d.paused === null);
    // Charged first, so that each invoice is written once, with its charge (the charges are only
    // broadcast once this transaction commits).
    const { charged, taken, failed } = yield* collect(
      collected
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
      billed.map(({ row, id, period, totals, paused }) => ({
        id,
        ...(paused === null
          ? {}
          : { status: paused === "void" ? ("void" as const) : ("uncollectible" as const) }),
        scope: { merchantId: row.merchant_id, livemode: row.livemode },
        subscriptionId: row.id,
        period,
        periodStart: periodStart(row.anchor, period),
        periodEnd: periodStart(row.anchor, period + 1),
        totals,
        attempted: paused === null && totals.total > 0n,
        charge: chargeOf.get(id),
      })),
    );
    yield* store.advance(
      written.map(({ row, id, period, window, totals, paused }) => {
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
          creditAfter: invoiced.has(`${row.id}:${period}`) || paused !== null ? null : totals.endingCredit,
        };
      }),
    );
    yield* markPaid(
      collected
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
