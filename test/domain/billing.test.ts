/**
 * Billing's steps on a real Postgres with a fake chain and relayer (harness.ts): a boundary invoices and
 * charges, the chain's charge pays the invoice, a failing charge follows the dunning schedule to an
 * uncollectible invoice and a canceled subscription, and a batch with one failing charge sends the rest
 * as one `chargeMany` after bisecting; a merchant whose share of the relayer's budget is spent waits while
 * the others are charged.
 */
import { expect, layer } from "@effect/vitest";
import { Effect, Layer } from "effect";
import { SqlClient } from "effect/sql";
import type { Hex } from "viem";
import { MerchantChains } from "../../service/chains/merchant-chains.ts";
import { onchainChargeId } from "../../service/charges/charge-ids.ts";
import { ChargeStore } from "../../service/charges/charge-store.ts";
import { Outbox } from "../../service/events/outbox.ts";
import { FactApplication } from "../../service/facts/fact-application.ts";
import type { FactRow } from "../../service/facts/fact-row.ts";
import { MandateStore } from "../../service/mandates/mandate-store.ts";
import { onchainMandateId } from "../../service/mandates/terms.ts";
import { Merchants } from "../../service/merchants/merchants.ts";
import type { MerchantScope } from "../../service/merchants/scope.ts";
import { billChain, settleChain } from "../../service/subscriptions/billing/billing-worker.ts";
import { InvoiceStore } from "../../service/subscriptions/invoice-store.ts";
import { Prices } from "../../service/subscriptions/prices.ts";
import { SubscriptionStore } from "../../service/subscriptions/subscription-store.ts";
import { Subscriptions } from "../../service/subscriptions/subscriptions.ts";
import { AT_RISK_LEAD_SECONDS } from "../../service/subscriptions/warnings.ts";
import { periodStart } from "../../src/ledger/period.ts";
import { CHAIN, domainTestLayer, fakeChain, freshDatabase, GAS_PER_CHARGE } from "./harness.ts";

const DAY = 86_400;
const START = Date.UTC(2031, 2, 10, 12) / 1000;
const chain = fakeChain(START);
let payouts = 0;
const payoutOf = new Map<string, Hex>();

const testLayer = Layer.unwrap(
  Effect.promise(async () => domainTestLayer(await freshDatabase("billing"), chain)),
);

let wallets = 0;
const nextWallet = (): Hex => `0x${(++wallets).toString(16).padStart(40, "c")}` as Hex;

const merchant = Effect.gen(function* () {
  const created = yield* (yield* Merchants).create("Shop");
  const scope: MerchantScope = { merchantId: created.id, livemode: false };
  const payout = `0x${(++payouts).toString(16).padStart(40, "b")}` as Hex;
  payoutOf.set(created.id, payout);
  yield* (yield* MerchantChains).configure(scope, { chain: CHAIN.id, payout_address: payout });
  return scope;
});

/** A subscription whose customer has signed (as the chain's MandateAuthorized fact would record it). */
const signedSubscription = (scope: MerchantScope, price: string) =>
  Effect.gen(function* () {
    const subscription = yield* (yield* Subscriptions).create(scope, { customer: "cus_1", price });
    const mandates = yield* MandateStore;
    const mandate = yield* mandates.reload(subscription.mandate);
    const customer = nextWallet();
    const onchainId = onchainMandateId(customer, BigInt(mandate.salt));
    yield* mandates.bindWallet(mandate.id, customer, onchainId);
    yield* mandates.recordAuthorized([
      {
        mandateId: mandate.id,
        terms: {
          customer,
          nonce: "1",
          approval: (BigInt(mandate.cap) * 12n).toString(),
          cap: mandate.cap,
          approvalPeriods: 12,
          operator: mandate.operator_address as Hex,
          holdSeconds: 0,
          authorizedAt: chain.time,
        },
      },
    ]);
    return { id: subscription.id, mandate: mandate.id, onchainId, customer, anchor: mandate.anchor };
  });

/** `count` signed subscriptions to one price. */
const signedSubscriptions = (scope: MerchantScope, price: string, count: number) =>
  Effect.all(Array.from({ length: count }, () => signedSubscription(scope, price)));

/** Forgets the chain's recorded simulations and measurements; returns how many transactions were sent. */
const freshChainRecords = () => {
  chain.simulations.length = 0;
  chain.measurements.length = 0;
  return chain.sent.length;
};

/** A new merchant with a new price of `amount` a period on the test chain. */
const merchantWithPrice = (amount: string) =>
  Effect.gen(function* () {
    const scope = yield* merchant;
    const price = yield* (yield* Prices).create(scope, {
      product_name: "Seat",
      amount_decimal: amount,
      chain: CHAIN.id,
    });
    return { scope, price: price.id };
  });

/**
 * The chain's `Charged` log of a mandate's period (or with `kind`, the `Returned` log of its held
 * charge), applied as the fact relay applies it.
 */
const chainCharged = (
  scope: MerchantScope,
  sub: { onchainId: Hex; customer: Hex },
  period: number,
  amount: bigint,
  kind: "charge.succeeded" | "charge.returned" = "charge.succeeded",
) =>
  Effect.gen(function* () {
    const fact: FactRow = {
      key: `31337:${kind}:${onchainChargeId(sub.onchainId, period)}`,
      kind,
      chain_id: CHAIN.id,
      block_number: String(period + 100),
      block_hash: `0x${"ab".repeat(32)}`,
      timestamp: String(chain.time),
      tx_hash: `0x${"cd".repeat(32)}`,
      log_index: 0,
      mandate_id: sub.onchainId,
      charge_id: onchainChargeId(sub.onchainId, period),
      payment_id: null,
      amount: amount.toString(),
      customer: sub.customer,
      payee: payoutOf.get(scope.merchantId) ?? "",
      token: CHAIN.tokens[0]?.address ?? "",
      details: { period, release_at: kind === "charge.returned" ? chain.time + DAY : 0, approval_left: "0" },
    };
    const events = yield* (yield* FactApplication).apply(fact, {
      merchantId: scope.merchantId,
      chain: CHAIN,
    });
    if (events) yield* (yield* Outbox).insert(events);
  }).pipe(Effect.flatMap(() => Effect.void));

const bill = Effect.suspend(() => billChain(CHAIN, chain.time));

/** The invoice's charge, and whether it is marked as still without an outcome. */
const linkOf = (invoice: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ charge_id: string | null; charge_pending: boolean }>`SELECT charge_id, charge_pending
      FROM billing.invoices WHERE id = ${invoice}`.pipe(Effect.map(([row]) => row)),
  );

const eventTypes = (subject: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql<{ type: string }>`SELECT type FROM billing.events
      WHERE payload::text LIKE ${`%${subject}%`} ORDER BY inserted_at, id`.pipe(
      Effect.map((rows) => rows.map((row) => row.type)),
    ),
  );

layer(testLayer, { timeout: "60 seconds" })("billing steps with a fake chain", (it) => {
  it.effect("invoices a period at its boundary, charges it once, and is paid by the chain's charge", () =>
    Effect.gen(function* () {
      const { scope, price } = yield* merchantWithPrice("10");
      const sub = yield* signedSubscription(scope, price);
      const sent = chain.sent.length;

      yield* bill; // activates it; its first period is due at once and billed in the same round
      const subscriptions = yield* SubscriptionStore;
      const invoices = yield* InvoiceStore;
      const row = yield* subscriptions.reload(sub.id);
      expect(row.status).toBe("active");
      expect(row.current_period).toBe(0);
      expect(row.next_billing_at).toBe(periodStart(sub.anchor, 1));
      const [invoice] = (yield* invoices.page(scope, { subscription: sub.id }, {})).data;
      expect(invoice).toMatchObject({ status: "open", total: "10000000", attempt_count: 1 });
      // Written with the charge of its first attempt, pending until the chain's outcome.
      expect(yield* linkOf(invoice?.id ?? "")).toEqual({
        charge_id: (yield* (yield* MandateStore).reload(sub.mandate)).latest_charge,
        charge_pending: true,
      });
      expect(chain.sent.length).toBe(sent + 1);
      expect(chain.sent.at(-1)?.purpose).toMatch(/^charge:31337:/);

      yield* bill; // nothing new: the charge is pending on chain
      expect(chain.sent.length).toBe(sent + 1);

      yield* chainCharged(scope, sub, 0, 10_000_000n);
      yield* bill;
      expect((yield* invoices.reload(invoice?.id ?? "")).status).toBe("paid");
      expect(yield* eventTypes(invoice?.id ?? "")).toEqual(["invoice.paid"]);
    }),
  );

  it.effect("the settlement pass pays an invoice whose charge succeeded, and bills nothing", () =>
    Effect.gen(function* () {
      const { scope, price } = yield* merchantWithPrice("3");
      const sub = yield* signedSubscription(scope, price);
      yield* bill;
      const invoices = yield* InvoiceStore;
      const [first] = (yield* invoices.page(scope, { subscription: sub.id }, {})).data;
      yield* chainCharged(scope, sub, 0, 3_000_000n);
      // The next period is due as well: only the billing pass bills it.
      chain.time = Math.max(chain.time, periodStart(sub.anchor, 1));
      const sent = chain.sent.length;
      expect(yield* settleChain(CHAIN, chain.time)).toBe(false);
      expect((yield* invoices.reload(first?.id ?? "")).status).toBe("paid");
      expect(yield* eventTypes(first?.id ?? "")).toEqual(["invoice.paid"]);
      expect((yield* invoices.page(scope, { subscription: sub.id }, {})).data).toHaveLength(1);
      expect(chain.sent.length).toBe(sent);
      yield* bill;
      expect((yield* invoices.page(scope, { subscription: sub.id }, {})).data).toHaveLength(2);
      expect(yield* eventTypes(first?.id ?? "")).toEqual(["invoice.paid"]);
    }),
  );

  it.effect(
    "a paid invoice whose charge is returned is unpaid: past_due, no retry, uncollectible at its period's end, the subscription kept",
    () =>
      Effect.gen(function* () {
        const { scope, price } = yield* merchantWithPrice("6");
        const sub = yield* signedSubscription(scope, price);
        const invoices = yield* InvoiceStore;
        const subscriptions = yield* SubscriptionStore;
        yield* bill;
        const [first] = (yield* invoices.page(scope, { subscription: sub.id }, {})).data;
        const id = first?.id ?? "";
        yield* chainCharged(scope, sub, 0, 6_000_000n);
        yield* bill;
        expect((yield* invoices.reload(id)).status).toBe("paid");

        yield* chainCharged(scope, sub, 0, 6_000_000n, "charge.returned");
        const sent = chain.sent.length;
        yield* bill;
        const returned = yield* invoices.reload(id);
        expect(returned).toMatchObject({
          status: "open",
          amount_paid: "0",
          amount_returned: "6000000",
          returned_at: chain.time,
          failure_code: "charge_returned",
          next_attempt_at: null,
          paid_at: null,
        });
        expect((yield* Subscriptions).renderInvoice(returned)).toMatchObject({
          amount_paid_decimal: "0",
          amount_remaining_decimal: "6",
          amount_returned_decimal: "6",
          failure_code: "charge_returned",
          next_payment_attempt: null,
        });
        expect((yield* subscriptions.reload(sub.id)).status).toBe("past_due");
        expect(yield* eventTypes(id)).toEqual(["invoice.paid", "invoice.payment_failed"]);

        yield* bill; // settled once: no second event, and no retry (the escrow takes one charge a period)
        expect(yield* eventTypes(id)).toEqual(["invoice.paid", "invoice.payment_failed"]);
        expect(chain.sent.length).toBe(sent);

        chain.time = Math.max(chain.time, periodStart(sub.anchor, 1));
        yield* bill; // its period ended: uncollectible; the subscription stays and bills the next period
        expect((yield* invoices.reload(id)).status).toBe("uncollectible");
        expect((yield* subscriptions.reload(sub.id)).status).toBe("past_due");
        const next = (yield* invoices.page(scope, { subscription: sub.id }, {})).data.find(
          (i) => i.period === 1,
        );
        expect(next?.status).toBe("open");
        yield* chainCharged(scope, sub, 1, 6_000_000n);
        yield* bill;
        expect((yield* invoices.reload(next?.id ?? "")).status).toBe("paid");
        expect((yield* subscriptions.reload(sub.id)).status).toBe("active");
      }),
  );

  it.effect("an open invoice whose charge was returned before it was settled is never marked paid", () =>
    Effect.gen(function* () {
      const { scope, price } = yield* merchantWithPrice("4");
      const sub = yield* signedSubscription(scope, price);
      const invoices = yield* InvoiceStore;
      yield* bill;
      const [invoice] = (yield* invoices.page(scope, { subscription: sub.id }, {})).data;
      const id = invoice?.id ?? "";
      // Charged and returned between two passes of billing.
      yield* chainCharged(scope, sub, 0, 4_000_000n);
      yield* chainCharged(scope, sub, 0, 4_000_000n, "charge.returned");
      yield* bill;
      expect(yield* invoices.reload(id)).toMatchObject({
        status: "open",
        amount_paid: "0",
        amount_returned: "4000000",
        failure_code: "charge_returned",
      });
      expect(yield* eventTypes(id)).toEqual(["invoice.payment_failed"]);
      expect((yield* (yield* SubscriptionStore).reload(sub.id)).status).toBe("past_due");
    }),
  );

  it.effect("links a boundary's invoice to the charge that already took its period, and settles it", () =>
    Effect.gen(function* () {
      const { scope, price } = yield* merchantWithPrice("5");
      const sub = yield* signedSubscription(scope, price);
      // Another operator's charge of the first period, succeeded before billing first looks.
      yield* chainCharged(scope, sub, 0, 5_000_000n);
      const taken = yield* (yield* ChargeStore).periodCharge(sub.mandate, 0);
      const sent = freshChainRecords();

      yield* bill; // activated and invoiced; the charge is refused for the period, so the invoice links it
      const invoices = yield* InvoiceStore;
      const [invoice] = (yield* invoices.page(scope, { subscription: sub.id }, {})).data;
      expect(taken).toBeDefined();
      expect(yield* linkOf(invoice?.id ?? "")).toEqual({ charge_id: taken, charge_pending: false });
      expect(chain.sent.length).toBe(sent);
      yield* bill;
      expect((yield* invoices.reload(invoice?.id ?? "")).status).toBe("paid");
      expect(yield* eventTypes(invoice?.id ?? "")).toEqual(["invoice.paid"]);
    }),
  );

  it.effect("activates only subscriptions whose mandate left pending, not abandoned checkouts", () =>
    Effect.gen(function* () {
      const { scope, price } = yield* merchantWithPrice("2");
      const subscriptions = yield* Subscriptions;
      const store = yield* SubscriptionStore;
      const abandoned = yield* subscriptions.create(scope, { customer: "cus_2", price });
      const signed = yield* signedSubscription(scope, price);

      const due = yield* store.authorised(CHAIN.id, 10_000);
      expect(due).toContain(signed.id);
      expect(due).not.toContain(abandoned.id);
      yield* bill;
      expect((yield* store.reload(signed.id)).status).toBe("active");
      expect((yield* store.reload(abandoned.id)).status).toBe("incomplete");
      expect(yield* store.authorised(CHAIN.id, 10_000)).not.toContain(signed.id);
    }),
  );

  it.effect("holds an at-risk check due from its time until its charge is due, not before or after", () =>
    Effect.gen(function* () {
      const { scope, price } = yield* merchantWithPrice("9");
      const sub = yield* signedSubscription(scope, price);
      yield* bill;
      const subscriptions = yield* SubscriptionStore;
      const charge = periodStart(sub.anchor, 1);
      expect((yield* subscriptions.reload(sub.id)).at_risk_check_at).toBe(charge - AT_RISK_LEAD_SECONDS);
      const dueAt = (now: number) =>
        Effect.map(subscriptions.checksDue(CHAIN.id, "at_risk_check_at", now, 10_000), (ids) =>
          ids.includes(sub.id),
        );
      const lead = charge - AT_RISK_LEAD_SECONDS;
      expect(yield* dueAt(lead - 1)).toBe(false);
      expect(yield* dueAt(lead)).toBe(true);
      expect(yield* dueAt(charge - 1)).toBe(true);
      expect(yield* dueAt(charge)).toBe(false);
      expect(yield* dueAt(charge + 31 * DAY)).toBe(false);
    }),
  );

  it.effect("retries a failing charge on the dunning schedule, then ends the subscription", () =>
    Effect.gen(function* () {
      const { scope, price } = yield* merchantWithPrice("7");
      const sub = yield* signedSubscription(scope, price);
      chain.failing.set(sub.onchainId.toLowerCase(), "InsufficientBalance");
      const invoices = yield* InvoiceStore;

      yield* bill;
      const [invoice] = (yield* invoices.page(scope, { subscription: sub.id }, {})).data;
      const id = invoice?.id ?? "";
      const retries: number[] = [];
      for (let attempt = 0; attempt < 10; attempt++) {
        const current = yield* invoices.reload(id);
        if (current.status !== "open" || current.next_attempt_at === null) break;
        retries.push((current.next_attempt_at - (current.first_failed_at ?? 0)) / DAY);
        chain.time = current.next_attempt_at;
        yield* bill;
      }
      expect(retries).toEqual([1, 3, 5, 7]);
      const final = yield* invoices.reload(id);
      expect(final.status).toBe("uncollectible");
      expect(final.attempt_count).toBe(5);
      expect((yield* (yield* SubscriptionStore).reload(sub.id)).status).toBe("canceled");
      const types = yield* eventTypes(id);
      expect(types.filter((t) => t === "invoice.payment_failed")).toHaveLength(5);
      // Each failed attempt was simulated and refused by the escrow: no transaction was sent for it.
      expect(chain.sent.some((tx) => tx.data.includes(sub.onchainId.slice(2).toLowerCase()))).toBe(false);
      chain.failing.delete(sub.onchainId.toLowerCase());
    }),
  );

  it.effect("settles an invoice in dunning with the charge that took its period, already succeeded", () =>
    Effect.gen(function* () {
      const { scope, price } = yield* merchantWithPrice("6");
      const sub = yield* signedSubscription(scope, price);
      chain.failing.set(sub.onchainId.toLowerCase(), "InsufficientBalance");
      const invoices = yield* InvoiceStore;

      yield* bill; // the first attempt fails: its charge is recorded failed, a retry is scheduled
      const [invoice] = (yield* invoices.page(scope, { subscription: sub.id }, {})).data;
      const id = invoice?.id ?? "";
      const failedCharge = (yield* invoices.reload(id)).charge_id;
      expect((yield* invoices.reload(id)).next_attempt_at).not.toBeNull();
      chain.failing.delete(sub.onchainId.toLowerCase());

      // Another operator's charge of the period, already succeeded when billing next looks.
      yield* chainCharged(scope, sub, 0, 6_000_000n);
      yield* bill; // relinked to that charge
      const relinked = yield* invoices.reload(id);
      expect(relinked.charge_id).not.toBe(failedCharge);
      yield* bill; // its outcome is known at the link: settled, with no retry
      expect((yield* invoices.reload(id)).status).toBe("paid");
      expect(yield* eventTypes(id)).toEqual(["invoice.payment_failed", "invoice.paid"]);
    }),
  );

  it.effect("charges a boundary's invoices in one chargeMany, bisecting out the one that fails", () =>
    Effect.gen(function* () {
      const { scope, price } = yield* merchantWithPrice("3");
      const subs = yield* signedSubscriptions(scope, price, 8);
      const [broke] = subs.slice(5, 6);
      chain.failing.set(broke?.onchainId.toLowerCase() ?? "", "InsufficientBalance");
      const sent = freshChainRecords();

      yield* bill;
      const batches = chain.sent.slice(sent);
      expect(batches).toHaveLength(1);
      expect(batches[0]?.purpose).toMatch(/^charges:31337:/);
      for (const sub of subs) {
        const inBatch = batches[0]?.data.includes(sub.onchainId.slice(2).toLowerCase());
        expect(inBatch, sub.id).toBe(sub !== broke);
      }
      // The whole batch's measurement fails; one whole simulation, then halves down to the failing
      // charge: 1 + 2·log2(8) at most. The relayer measures the rest itself.
      expect(chain.measurements).toEqual([{ functionName: "chargeMany", charges: 8 }]);
      expect(chain.simulations.length).toBeLessThanOrEqual(7);
      expect(batches[0]?.gasUsed).toBeUndefined();
      const invoices = yield* InvoiceStore;
      const [failed] = (yield* invoices.page(scope, { subscription: broke?.id ?? "" }, {})).data;
      expect(failed?.first_failed_at).toBe(chain.time);
      chain.failing.clear();
    }),
  );

  it.effect(
    "charges other merchants' invoices while one merchant's share of the relayer budget is spent; that one's wait",
    () =>
      Effect.gen(function* () {
        const spent = yield* merchantWithPrice("5");
        const other = yield* merchantWithPrice("6");
        const waiting = yield* signedSubscriptions(spent.scope, spent.price, 3);
        const going = yield* signedSubscriptions(other.scope, other.price, 3);
        chain.spentShares.add(spent.scope.merchantId);
        const sent = freshChainRecords();

        // The boundary's batch is refused for the spent merchant; each invoice is then charged alone, as
        // after a refusal of the chain's budget: the other merchant's go out, the spent one's wait.
        yield* bill;
        const charged = chain.sent.slice(sent);
        expect(charged.flatMap((tx) => tx.merchants ?? [])).not.toContain(spent.scope.merchantId);
        const invoices = yield* InvoiceStore;
        for (const sub of going) {
          const [invoice] = (yield* invoices.page(other.scope, { subscription: sub.id }, {})).data;
          expect((yield* linkOf(invoice?.id ?? ""))?.charge_id, sub.id).not.toBeNull();
          expect(charged.some((tx) => tx.data.includes(sub.onchainId.slice(2).toLowerCase()))).toBe(true);
        }
        for (const sub of waiting)
          expect((yield* invoices.page(spent.scope, { subscription: sub.id }, {})).data).toEqual([]);

        // Once its share has room again, the spent merchant's boundary is billed in one batch.
        chain.spentShares.delete(spent.scope.merchantId);
        const later = freshChainRecords();
        yield* bill;
        const batches = chain.sent.slice(later);
        expect(batches).toHaveLength(1);
        expect(batches[0]?.merchants).toEqual(waiting.map(() => spent.scope.merchantId));
      }),
  );

  it.effect("runs a boundary's batch that succeeds once: its measured gas goes to the relayer", () =>
    Effect.gen(function* () {
      const { scope, price } = yield* merchantWithPrice("4");
      const subs = yield* signedSubscriptions(scope, price, 5);
      const sent = freshChainRecords();

      yield* bill;
      const batches = chain.sent.slice(sent);
      expect(batches).toHaveLength(1);
      for (const sub of subs) expect(batches[0]?.data).toContain(sub.onchainId.slice(2).toLowerCase());
      expect(chain.measurements).toEqual([{ functionName: "chargeMany", charges: 5 }]);
      expect(chain.simulations).toEqual([]);
      expect(batches[0]?.gasUsed).toBe(GAS_PER_CHARGE * 5n);
    }),
  );
});
