/**
 * Pending updates on a real Postgres with a fake chain (harness.ts): an upgrade above the cap waits,
 * and is applied by the billing round once the customer's signature of a higher cap is recorded (as the
 * chain's MandateAuthorized fact records it), with prorations for the time left then and the next
 * invoice charged once within the new cap; one whose boundary comes first is billed at the old price,
 * applied in the next period, or expires at its expires_at.
 */
import { expect, layer } from "@effect/vitest";
import { Effect, Layer } from "effect";
import { SqlClient } from "effect/sql";
import type { Hex } from "viem";
import { MerchantChains } from "../../service/chains/merchant-chains.ts";
import { onchainChargeId } from "../../service/charges/charge-ids.ts";
import { Outbox } from "../../service/events/outbox.ts";
import { FactApplication } from "../../service/facts/fact-application.ts";
import type { FactRow } from "../../service/facts/fact-row.ts";
import { MandateStore } from "../../service/mandates/mandate-store.ts";
import { onchainMandateId } from "../../service/mandates/terms.ts";
import { Merchants } from "../../service/merchants/merchants.ts";
import type { MerchantScope } from "../../service/merchants/scope.ts";
import { billChain } from "../../service/subscriptions/billing/billing-worker.ts";
import { InvoiceStore } from "../../service/subscriptions/invoice-store.ts";
import { PlanChanges } from "../../service/subscriptions/plan-changes.ts";
import { Prices } from "../../service/subscriptions/prices.ts";
import { prorate } from "../../service/subscriptions/proration.ts";
import { SubscriptionStore } from "../../service/subscriptions/subscription-store.ts";
import { Subscriptions } from "../../service/subscriptions/subscriptions.ts";
import { periodStart } from "../../src/ledger/period.ts";
import { CHAIN, domainTestLayer, fakeChain, freshDatabase } from "./harness.ts";

const DAY = 86_400;
const USDC = 1_000_000n;
const START = Date.UTC(2031, 4, 7, 9) / 1000;
const chain = fakeChain(START);
const payoutOf = new Map<string, Hex>();
let merchants = 0;
let wallets = 0;

const testLayer = Layer.unwrap(
  Effect.promise(async () => domainTestLayer(await freshDatabase("plan_changes"), chain)),
);

const merchantWithPrices = Effect.gen(function* () {
  const created = yield* (yield* Merchants).create("Shop");
  const scope: MerchantScope = { merchantId: created.id, livemode: false };
  const payout = `0x${(++merchants).toString(16).padStart(40, "b")}` as Hex;
  payoutOf.set(created.id, payout);
  yield* (yield* MerchantChains).configure(scope, { chain: CHAIN.id, payout_address: payout });
  const prices = yield* Prices;
  const basic = yield* prices.create(scope, { product_name: "Basic", amount_decimal: "10", chain: CHAIN.id });
  const pro = yield* prices.create(scope, { product_name: "Pro", amount_decimal: "20", chain: CHAIN.id });
  return { scope, basic: basic.id, pro: pro.id };
});

/** The customer's signature of `cap` (nonce `nonce`), recorded as the chain's MandateAuthorized fact does. */
const sign = (mandateId: string, customer: Hex, cap: bigint, nonce: number) =>
  Effect.gen(function* () {
    const mandates = yield* MandateStore;
    const mandate = yield* mandates.reload(mandateId);
    yield* mandates.recordAuthorized([
      {
        mandateId,
        terms: {
          customer,
          nonce: String(nonce),
          approval: (cap * 12n).toString(),
          cap: cap.toString(),
          approvalPeriods: 12,
          operator: mandate.operator_address as Hex,
          holdSeconds: 0,
          authorizedAt: chain.time,
        },
      },
    ]);
  });

const bill = Effect.suspend(() => billChain(CHAIN, chain.time));

/** The chain's `Charged` log of a mandate's period, applied as the fact relay applies it. */
const chainCharged = (scope: MerchantScope, onchainId: Hex, customer: Hex, period: number, amount: bigint) =>
  Effect.gen(function* () {
    const fact: FactRow = {
      key: `31337:charge:${onchainChargeId(onchainId, period)}`,
      kind: "charge.succeeded",
      chain_id: CHAIN.id,
      block_number: String(period + 100),
      block_hash: `0x${"ab".repeat(32)}`,
      timestamp: String(chain.time),
      tx_hash: `0x${"cd".repeat(32)}`,
      log_index: 0,
      mandate_id: onchainId,
      charge_id: onchainChargeId(onchainId, period),
      payment_id: null,
      amount: amount.toString(),
      customer,
      payee: payoutOf.get(scope.merchantId) ?? "",
      token: CHAIN.tokens[0]?.address ?? "",
      details: { period, release_at: 0, approval_left: "0" },
    };
    const events = yield* (yield* FactApplication).apply(fact, {
      merchantId: scope.merchantId,
      chain: CHAIN,
    });
    if (events) yield* (yield* Outbox).insert(events);
  });

/** A subscription to `price` under `cap`, signed, with its first period billed and paid. */
const paidSubscription = (scope: MerchantScope, price: string, cap: string) =>
  Effect.gen(function* () {
    const subscription = yield* (yield* Subscriptions).create(scope, {
      customer: "cus_1",
      price,
      cap_decimal: cap,
    });
    const mandates = yield* MandateStore;
    const mandate = yield* mandates.reload(subscription.mandate);
    const customer = `0x${(++wallets).toString(16).padStart(40, "c")}` as Hex;
    const onchainId = onchainMandateId(customer, BigInt(mandate.salt));
    yield* mandates.bindWallet(mandate.id, customer, onchainId);
    yield* sign(mandate.id, customer, BigInt(mandate.cap), 1);
    yield* bill;
    yield* chainCharged(scope, onchainId, customer, 0, 10n * USDC);
    yield* bill;
    return { id: subscription.id, mandate: mandate.id, customer, onchainId, anchor: mandate.anchor };
  });

/** The subscription's invoice for `period` (the harness's ids are not in time order). */
const invoiceOf = (scope: MerchantScope, subscription: string, period: number) =>
  Effect.map(
    Effect.flatMap(InvoiceStore, (invoices) => invoices.page(scope, { subscription }, { limit: 100 })),
    (page) => page.data.find((invoice) => invoice.period === period),
  );

const eventsOf = (subject: string, type: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ payload: { data: { object: Record<string, unknown> } } }>`SELECT payload FROM billing.events
      WHERE type = ${type} AND payload::text LIKE ${`%${subject}%`} ORDER BY inserted_at, id`.pipe(
      Effect.map((rows) => rows.map((row) => row.payload.data.object)),
    ),
  );

layer(testLayer, { timeout: "60 seconds" })("pending updates with a fake chain", (it) => {
  it.effect(
    "applies a pending upgrade once the customer signs a higher cap, prorated from then, charged once",
    () =>
      Effect.gen(function* () {
        const { scope, basic, pro } = yield* merchantWithPrices;
        const sub = yield* paidSubscription(scope, basic, "15");
        const store = yield* SubscriptionStore;
        const changes = yield* PlanChanges;

        chain.time = sub.anchor + 5 * DAY;
        const asked = yield* changes.update(scope, sub.id, { price: pro });
        expect(asked.price).toBe(basic);
        expect(asked.pending_update).toMatchObject({ price: pro, expires_at: periodStart(sub.anchor, 2) });
        const [warning] = yield* eventsOf(sub.id, "schedule.upcoming_charge_at_risk");
        expect(warning).toMatchObject({ reason: "mandate_cap_exceeded", period: 1, cap_decimal: "15" });

        chain.time += DAY;
        yield* bill; // the cap is still 15: nothing applies
        expect((yield* store.reload(sub.id)).price_id).toBe(basic);
        expect(yield* eventsOf(sub.id, "subscription.pending_update_applied")).toEqual([]);

        // The customer signs 40 at the same link (nonce 2): the next round applies the change.
        chain.time += DAY;
        const appliedAt = chain.time;
        yield* sign(sub.mandate, sub.customer, 40n * USDC, 2);
        yield* bill;
        const row = yield* store.reload(sub.id);
        expect(row.price_id).toBe(pro);
        expect(row.pending_change).toBeNull();
        const exact = prorate({
          periodStart: periodStart(sub.anchor, 0),
          periodEnd: periodStart(sub.anchor, 1),
          at: appliedAt,
          oldAmount: 10n * USDC,
          newAmount: 20n * USDC,
        });
        expect(row.prorations.map((p) => BigInt(p.amount))).toEqual([-exact.credit, exact.charge]);
        expect(yield* eventsOf(sub.id, "subscription.pending_update_applied")).toHaveLength(1);

        const sent = chain.sent.length;
        chain.time = periodStart(sub.anchor, 1);
        yield* bill;
        const invoice = yield* invoiceOf(scope, sub.id, 1);
        const total = 20n * USDC + exact.charge - exact.credit;
        expect(invoice).toMatchObject({ period: 1, total: total.toString() });
        expect(total).toBeLessThanOrEqual(40n * USDC);
        expect(invoice?.lines.map((l) => l.kind)).toEqual(["price", "proration", "proration"]);
        expect(
          chain.sent.slice(sent).filter((tx) => tx.data.includes(sub.onchainId.slice(2).toLowerCase())),
        ).toHaveLength(1);
        expect((yield* store.reload(sub.id)).prorations).toEqual([]);
      }),
  );

  it.effect("refuses a price in another token than the mandate's, changing nothing", () =>
    Effect.gen(function* () {
      const { scope, basic, pro } = yield* merchantWithPrices;
      const sub = yield* paidSubscription(scope, basic, "40");
      const sql = yield* SqlClient.SqlClient;
      yield* sql`UPDATE billing.prices SET token_address = '0x000000000000000000000000000000000000dA1a' WHERE id = ${pro}`;
      const refused = yield* Effect.flip((yield* PlanChanges).update(scope, sub.id, { price: pro }));
      expect(refused).toMatchObject({ code: "price_not_applicable", param: "price" });
      expect((yield* (yield* SubscriptionStore).reload(sub.id)).price_id).toBe(basic);
    }),
  );

  it.effect("bills the old price when the boundary comes first, then applies in the next period", () =>
    Effect.gen(function* () {
      const { scope, basic, pro } = yield* merchantWithPrices;
      const sub = yield* paidSubscription(scope, basic, "15");
      const store = yield* SubscriptionStore;
      const changes = yield* PlanChanges;
      chain.time = sub.anchor + 20 * DAY;
      yield* changes.update(scope, sub.id, { price: pro });

      chain.time = periodStart(sub.anchor, 1);
      yield* bill;
      const first = yield* invoiceOf(scope, sub.id, 1);
      expect(first).toMatchObject({ period: 1, total: (10n * USDC).toString() });
      expect((yield* store.reload(sub.id)).pending_change).toMatchObject({ state: "pending", price: pro });

      chain.time += 3 * DAY;
      yield* sign(sub.mandate, sub.customer, 40n * USDC, 2);
      yield* bill;
      const row = yield* store.reload(sub.id);
      expect(row.price_id).toBe(pro);
      // Prorated within period 1, from when it applied.
      expect(row.prorations.every((p) => p.period === 1 && p.from === chain.time)).toBe(true);
    }),
  );

  it.effect("expires a pending update at its expires_at, before the period is billed at the old price", () =>
    Effect.gen(function* () {
      const { scope, basic, pro } = yield* merchantWithPrices;
      const sub = yield* paidSubscription(scope, basic, "15");
      const store = yield* SubscriptionStore;
      const changes = yield* PlanChanges;
      chain.time = sub.anchor + 2 * DAY;
      yield* changes.update(scope, sub.id, { price: pro });
      chain.time = periodStart(sub.anchor, 1);
      yield* bill;
      chain.time = periodStart(sub.anchor, 2) - 1;
      yield* bill;
      expect((yield* store.reload(sub.id)).pending_change).not.toBeNull();
      chain.time = periodStart(sub.anchor, 2);
      yield* bill;
      const row = yield* store.reload(sub.id);
      expect(row.pending_change).toBeNull();
      expect(row.price_id).toBe(basic);
      expect(yield* eventsOf(sub.id, "subscription.pending_update_expired")).toHaveLength(1);
      const latest = yield* invoiceOf(scope, sub.id, 2);
      expect(latest).toMatchObject({ period: 2, total: (10n * USDC).toString() });
      // A signature after the expiry applies nothing.
      yield* sign(sub.mandate, sub.customer, 40n * USDC, 2);
      yield* bill;
      expect((yield* store.reload(sub.id)).price_id).toBe(basic);
    }),
  );
});
