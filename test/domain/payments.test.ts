/**
 * Payments' domain on a real Postgres with a fake chain and relayer (harness.ts): a confirmed sweep fact
 * applied twice counts once, the state machine raises one event per change, expiry waits for funds that
 * arrived in time, and the sweeper leaves a partial payment alone until its time is up, then sweeps the
 * due deposit addresses in one transaction, leaving out a merchant whose share of the relayer's budget is
 * spent. A payment naming another operator than this service's (terms made under a former operator) is
 * not returned by the service, and still swept.
 */
import { expect, layer } from "@effect/vitest";
import { Effect, Layer } from "effect";
import { SqlClient } from "effect/sql";
import { decodeFunctionData, type Hex } from "viem";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import { MerchantChains } from "../../service/chains/merchant-chains.ts";
import { Outbox } from "../../service/events/outbox.ts";
import { FactApplication } from "../../service/facts/fact-application.ts";
import type { FactRow } from "../../service/facts/fact-row.ts";
import { Merchants } from "../../service/merchants/merchants.ts";
import type { MerchantScope } from "../../service/merchants/scope.ts";
import { sweepDeposits } from "../../service/payments/deposit-sweeper.ts";
import { expirePayments } from "../../service/payments/payment-expiry.ts";
import { PaymentStore } from "../../service/payments/payment-store.ts";
import { PaymentTransitions } from "../../service/payments/payment-transitions.ts";
import { Payments } from "../../service/payments/payments.ts";
import { CHAIN, domainTestLayer, fakeChain, freshDatabase } from "./harness.ts";

const START = Date.UTC(2031, 5, 1, 12) / 1000;
const chain = fakeChain(START);
let payouts = 0;
let blocks = 1000;

const testLayer = Layer.unwrap(
  Effect.promise(async () => domainTestLayer(await freshDatabase("payments"), chain)),
);

const merchant = Effect.gen(function* () {
  const created = yield* (yield* Merchants).create("Shop");
  const scope: MerchantScope = { merchantId: created.id, livemode: false };
  const payout = `0x${(++payouts).toString(16).padStart(40, "a")}` as Hex;
  yield* (yield* MerchantChains).configure(scope, { chain: CHAIN.id, payout_address: payout });
  return { scope, payout };
});

/** The indexer's `payment.received` fact of a sweep of the payment's deposit address. */
const sweptFact = (payment: { id: string }, amount: bigint, received: bigint) =>
  Effect.gen(function* () {
    const row = yield* (yield* PaymentStore).reload(payment.id);
    blocks += 1;
    const fact: FactRow = {
      key: `31337:payment.received:${row.deposit_address}:${received}`,
      kind: "payment.received",
      chain_id: CHAIN.id,
      block_number: String(blocks),
      block_hash: `0x${blocks.toString(16).padStart(64, "0")}`,
      timestamp: String(chain.time),
      tx_hash: `0x${blocks.toString(16).padStart(64, "f")}`,
      log_index: 0,
      mandate_id: null,
      charge_id: null,
      payment_id: row.onchain_id,
      amount: amount.toString(),
      customer: null,
      payee: row.payee_address.toLowerCase(),
      token: row.token_address.toLowerCase(),
      details: {
        deposit_address: row.deposit_address,
        release_at: 0,
        held: "0",
        received: received.toString(),
      },
    };
    return fact;
  });

const applyFact = (scope: MerchantScope, fact: FactRow) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    return yield* sql.withTransaction(
      Effect.gen(function* () {
        const events = yield* (yield* FactApplication).apply(fact, {
          merchantId: scope.merchantId,
          chain: CHAIN,
        });
        if (events) yield* (yield* Outbox).insert(events);
        return events;
      }),
    );
  });

const eventTypes = (paymentId: string) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql`SELECT type FROM billing.events WHERE payload #>> '{data,object,id}' = ${paymentId} ORDER BY id`.pipe(
      Effect.map((rows) => rows.map((row) => String((row as { type: unknown }).type))),
    ),
  );

/** Funds the watcher saw arrive (unconfirmed). */
const seen = (paymentId: string, amount: bigint) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const store = yield* PaymentStore;
    const transitions = yield* PaymentTransitions;
    yield* sql.withTransaction(
      Effect.gen(function* () {
        const row = yield* store.lock(paymentId);
        yield* transitions.step(row, { kind: "seen", amount }, { now: chain.time });
        yield* store.markSweepDue([paymentId]);
      }),
    );
  });

layer(testLayer, { timeout: "60 seconds" })("payments with a fake chain", (it) => {
  it.effect(
    "applies a confirmed sweep once, however often the relay reads it, and raises one payment.paid",
    () =>
      Effect.gen(function* () {
        const { scope } = yield* merchant;
        const payment = yield* (yield* Payments).create(scope, { amount_decimal: "10" });
        expect(payment.status).toBe("requires_payment");
        const first = yield* sweptFact(payment, 4_000_000n, 4_000_000n);
        expect(yield* applyFact(scope, first)).toEqual([]);
        expect(yield* applyFact(scope, first)).toEqual([]);
        const partly = yield* (yield* Payments).retrieve(scope, payment.id);
        expect(partly).toMatchObject({ status: "processing", amount_received_decimal: "4" });
        const second = yield* sweptFact(payment, 6_000_000n, 10_000_000n);
        expect((yield* applyFact(scope, second))?.map((e) => e.type)).toEqual(["payment.paid"]);
        expect(yield* applyFact(scope, second)).toEqual([]);
        expect(yield* eventTypes(payment.id)).toEqual(["payment.paid"]);
        expect((yield* (yield* Payments).retrieve(scope, payment.id)).amount_received_decimal).toBe("10");
      }),
  );

  it.effect(
    "declines a fact naming another merchant's payment or another payment id (recorded as skipped)",
    () =>
      Effect.gen(function* () {
        const { scope } = yield* merchant;
        const other = yield* merchant;
        const payment = yield* (yield* Payments).create(scope, { amount_decimal: "1" });
        const fact = yield* sweptFact(payment, 1_000_000n, 1_000_000n);
        expect(yield* applyFact(other.scope, fact)).toBeUndefined();
        expect(yield* applyFact(scope, { ...fact, payment_id: `0x${"12".repeat(32)}` })).toBeUndefined();
        expect((yield* (yield* Payments).retrieve(scope, payment.id)).status).toBe("requires_payment");
      }),
  );

  it.effect("expires in chain time, waits for funds that arrived in time, then reports underpaid once", () =>
    Effect.gen(function* () {
      const { scope } = yield* merchant;
      const payments = yield* Payments;
      const empty = yield* payments.create(scope, { amount_decimal: "5", expires_in: 60 });
      const short = yield* payments.create(scope, { amount_decimal: "5", expires_in: 60 });
      yield* seen(short.id, 2_000_000n);
      chain.time += 61;
      yield* expirePayments;
      expect((yield* payments.retrieve(scope, empty.id)).status).toBe("expired");
      // Funds seen before expiry, not yet confirmed: it waits (and the sweeper is asked to sweep).
      expect((yield* payments.retrieve(scope, short.id)).status).toBe("processing");
      yield* applyFact(scope, yield* sweptFact(short, 2_000_000n, 2_000_000n));
      yield* expirePayments;
      yield* expirePayments;
      expect((yield* payments.retrieve(scope, short.id)).status).toBe("underpaid");
      expect(yield* eventTypes(short.id)).toEqual(["payment.underpaid"]);
      expect(yield* eventTypes(empty.id)).toEqual([]);
      // Canceling after expiry is refused; a late top-up completes it.
      expect(yield* Effect.flip(payments.cancel(scope, short.id))).toMatchObject({
        code: "payment_not_cancelable",
      });
      yield* applyFact(scope, yield* sweptFact(short, 3_000_000n, 5_000_000n));
      expect(yield* eventTypes(short.id)).toEqual(["payment.underpaid", "payment.paid"]);
    }),
  );

  it.effect("sweeps complete payments in one transaction and leaves a partial one until its time is up", () =>
    Effect.gen(function* () {
      const { scope } = yield* merchant;
      const payments = yield* Payments;
      const complete = yield* Effect.forEach([1, 2, 3], (n) =>
        payments.create(scope, { amount_decimal: `${n}` }),
      );
      const partial = yield* payments.create(scope, { amount_decimal: "9", expires_in: 60 });
      for (const [i, p] of complete.entries()) yield* seen(p.id, BigInt(i + 1) * 1_000_000n);
      yield* seen(partial.id, 1_000_000n);
      const before = chain.sent.length;
      yield* sweepDeposits;
      const sweeps = chain.sent.slice(before);
      expect(sweeps).toHaveLength(1);
      const call = decodeFunctionData({ abi: MandateEscrowAbi, data: sweeps[0]?.data ?? "0x" });
      expect(call.functionName).toBe("sweep");
      const swept = ((call.args?.[0] ?? []) as ReadonlyArray<{ paymentId: string }>).map((d) => d.paymentId);
      const store = yield* PaymentStore;
      const onchainIds = yield* Effect.forEach(complete, (p) =>
        Effect.map(store.reload(p.id), (r) => r.onchain_id),
      );
      const partialId = (yield* store.reload(partial.id)).onchain_id;
      // (Also swept: the earlier test's underpaid payment, closed with funds marked due.)
      expect(swept).toEqual(expect.arrayContaining(onchainIds));
      expect(swept).not.toContain(partialId);
      // Nothing new to sweep: no second transaction.
      yield* sweepDeposits;
      expect(chain.sent.length).toBe(before + 1);
      // The partial payment is swept once its time is up.
      chain.time += 61;
      yield* sweepDeposits;
      expect(chain.sent.length).toBe(before + 2);
      const last = decodeFunctionData({ abi: MandateEscrowAbi, data: chain.sent.at(-1)?.data ?? "0x" });
      expect(
        ((last.args?.[0] ?? []) as ReadonlyArray<{ paymentId: string }>).map((d) => d.paymentId),
      ).toEqual([partialId]);
    }),
  );

  it.effect(
    "sweeps other merchants' deposits while one merchant's share of the relayer budget is spent; that one's wait",
    () =>
      Effect.gen(function* () {
        const payments = yield* Payments;
        const store = yield* PaymentStore;
        const spent = yield* merchant;
        const other = yield* merchant;
        const waiting = yield* payments.create(spent.scope, { amount_decimal: "2" });
        const going = yield* payments.create(other.scope, { amount_decimal: "3" });
        yield* seen(waiting.id, 2_000_000n);
        yield* seen(going.id, 3_000_000n);
        chain.spentShares.add(spent.scope.merchantId);
        const before = chain.sent.length;
        yield* sweepDeposits;
        const sweeps = chain.sent.slice(before);
        expect(sweeps).toHaveLength(1);
        expect(sweeps[0]?.merchants).not.toContain(spent.scope.merchantId);
        const call = decodeFunctionData({ abi: MandateEscrowAbi, data: sweeps[0]?.data ?? "0x" });
        const swept = ((call.args?.[0] ?? []) as ReadonlyArray<{ paymentId: string }>).map(
          (d) => d.paymentId,
        );
        expect(swept).toContain((yield* store.reload(going.id)).onchain_id);
        expect(swept).not.toContain((yield* store.reload(waiting.id)).onchain_id);
        expect((yield* store.reload(going.id)).sweep_due).toBe(false);
        expect((yield* store.reload(waiting.id)).sweep_due).toBe(true);
        // Once the merchant's share has room again, its deposit is swept.
        chain.spentShares.delete(spent.scope.merchantId);
        yield* sweepDeposits;
        expect(chain.sent.length).toBe(before + 2);
        expect(chain.sent.at(-1)?.merchants).toEqual([spent.scope.merchantId]);
        expect((yield* store.reload(waiting.id)).sweep_due).toBe(false);
      }),
  );

  it.effect("refuses to return a payment naming another operator, sending nothing, and still sweeps it", () =>
    Effect.gen(function* () {
      const { scope } = yield* merchant;
      const payments = yield* Payments;
      const sql = yield* SqlClient.SqlClient;
      const ours = yield* payments.create(scope, { amount_decimal: "2" });
      const theirs = yield* payments.create(scope, { amount_decimal: "2" });
      // Terms made under a former operator, which this service's relayer no longer acts for.
      yield* sql`UPDATE billing.payments SET operator_address = ${`0x${"0f".repeat(20)}`} WHERE id = ${theirs.id}`;
      for (const p of [ours, theirs]) {
        const fact = yield* sweptFact(p, 2_000_000n, 2_000_000n);
        yield* applyFact(scope, {
          ...fact,
          details: { ...fact.details, release_at: chain.time + 3600, held: "2000000" },
        });
      }
      const payer = `0x${"0b".repeat(20)}`;
      const before = chain.sent.length;
      const refused = yield* Effect.flip(payments.returnPayment(scope, theirs.id, { address: payer }));
      expect(refused).toMatchObject({ code: "payment_not_returnable" });
      expect(refused.message).toMatch(/another operator/);
      expect(chain.sent.length).toBe(before);
      expect((yield* payments.retrieve(scope, theirs.id)).pending_action).toBeNull();
      // The same return of a payment naming this service is sent.
      expect((yield* payments.returnPayment(scope, ours.id, { address: payer })).pending_action).toBe(
        "return",
      );
      expect(chain.sent.length).toBe(before + 1);

      // Anyone may sweep (and release) a payment: a top-up to it is swept whatever operator it names.
      yield* seen(theirs.id, 1_000_000n);
      yield* sweepDeposits;
      expect(chain.sent.length).toBe(before + 2);
      const call = decodeFunctionData({ abi: MandateEscrowAbi, data: chain.sent.at(-1)?.data ?? "0x" });
      expect(call.functionName).toBe("sweep");
      const swept = ((call.args?.[0] ?? []) as ReadonlyArray<{ paymentId: string }>).map((d) => d.paymentId);
      expect(swept).toContain((yield* (yield* PaymentStore).reload(theirs.id)).onchain_id);
    }),
  );
});
