/**
 * Forgetting what the service derived from one chain, through each table's owner: the local stack's
 * crash recovery (scripts/stack/chain-recovery.ts) runs it when a local chain came back older than what
 * was recorded from it. Records go children first, in one transaction: the events about the chain with
 * their deliveries, usage, invoices, subscriptions, charges, mandates, payments, relayer transactions and their gas costs, the ledger, the relay's
 * cursor, and every stored idempotent reply (one could name a record that no longer exists). Merchants,
 * API keys, payout addresses, webhook endpoints, prices and coupons are kept.
 */
import { PgClient } from "@effect/sql-pg";
import { Duration, Effect, Layer, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import { BalanceStore } from "../balances/balance-store.ts";
import { GasCosts } from "../chains/gas-costs.ts";
import { RelayerStore } from "../chains/relayer-store.ts";
import { ChargeStore } from "../charges/charge-store.ts";
import { Outbox } from "../events/outbox.ts";
import { RelayStore } from "../facts/relay-store.ts";
import { Idempotency } from "../idempotency/idempotency.ts";
import { MandateStore } from "../mandates/mandate-store.ts";
import { GaslessPayers } from "../payments/gasless-payers.ts";
import { PaymentStore } from "../payments/payment-store.ts";
import { InvoiceStore } from "../subscriptions/invoice-store.ts";
import { SubscriptionStore } from "../subscriptions/subscription-store.ts";
import { UsageStore } from "../subscriptions/usage-store.ts";
import { DeliveryStore } from "../webhooks/delivery-store.ts";
import { webhookFanOut } from "../webhooks/fan-out.ts";

/** Removes the chain's records; returns how many of each kind were removed. */
export const forgetChain = (chainId: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const outbox = yield* Outbox;
    const deliveries = yield* DeliveryStore;
    const usage = yield* UsageStore;
    const invoices = yield* InvoiceStore;
    const subscriptions = yield* SubscriptionStore;
    const charges = yield* ChargeStore;
    const mandates = yield* MandateStore;
    const payments = yield* PaymentStore;
    const payers = yield* GaslessPayers;
    const relayer = yield* RelayerStore;
    const gasCosts = yield* GasCosts;
    const ledger = yield* BalanceStore;
    const relay = yield* RelayStore;
    const idempotency = yield* Idempotency;
    return yield* sql.withTransaction(
      Effect.gen(function* () {
        // The ledger first: its rows name charges and payments (by id, without a foreign key).
        yield* ledger.forgetChain(chainId);
        const events = yield* outbox.ofChain(chainId);
        yield* deliveries.forgetEvents(events);
        yield* outbox.forget(events);
        yield* usage.forgetChain(chainId);
        yield* invoices.forgetChain(chainId);
        const removed = {
          mandates: 0,
          charges: 0,
          payments: 0,
          subscriptions: yield* subscriptions.forgetChain(chainId),
          events: events.length,
          "relayer transactions": 0,
        };
        removed.charges = yield* charges.forgetChain(chainId);
        removed.mandates = yield* mandates.forgetChain(chainId);
        removed.payments = yield* payments.forgetChain(chainId);
        yield* payers.forgetChain(chainId);
        removed["relayer transactions"] = yield* relayer.forgetChain(chainId);
        // The blocks that paid these costs are gone with the chain's state.
        yield* gasCosts.forgetChain(chainId);
        // The chain's facts are relayed afresh from the start: the cursor could name a block that is gone.
        yield* relay.forgetChain(chainId);
        yield* idempotency.forgetAll;
        return removed;
      }),
    );
  });

/** The owners `forgetChain` goes through, on a database of their own (the stack runs it before the service). */
export const forgetChainLayer = (databaseUrl: string) => {
  const database = PgClient.layer({ url: Redacted.make(databaseUrl), maxConnections: 1 });
  const stores = Layer.mergeAll(
    DeliveryStore.layer,
    UsageStore.layer,
    InvoiceStore.layer,
    SubscriptionStore.layer,
    ChargeStore.layer,
    MandateStore.layer,
    PaymentStore.layer,
    GaslessPayers.layer,
    RelayerStore.layer,
    GasCosts.layer,
    BalanceStore.layer,
    RelayStore.layer,
    Idempotency.layer(Duration.hours(24)),
  ).pipe(Layer.provideMerge(database));
  return Outbox.layer.pipe(Layer.provide(webhookFanOut), Layer.provideMerge(stores));
};
