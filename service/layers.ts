/**
 * The composition root: which implementation of every service the process runs, built once per
 * runtime. Tiers go from infrastructure (Postgres, chains, config) through the stores (one writer per
 * table) and the domain services to the workers and the webhook dispatcher. Tests build parts of it, or
 * swap a layer (a fake chain, a fake relayer) under the same services.
 */
import { Duration, Layer, Logger, References } from "effect";
import { ApiKeys } from "./auth/api-keys.ts";
import { ConsoleSessions } from "./auth/console-sessions.ts";
import { BalanceStore } from "./balances/balance-store.ts";
import { ChainClients } from "./chains/chain-clients.ts";
import { ChainHeads } from "./chains/chain-heads.ts";
import { GasCosts } from "./chains/gas-costs.ts";
import { ChainWatch, indexerWatchdog } from "./chains/indexer-watchdog.ts";
import { MerchantChains } from "./chains/merchant-chains.ts";
import { ChainRegistry } from "./chains/registry.ts";
import { Relayer } from "./chains/relayer.ts";
import { RelayerAccount } from "./chains/relayer-account.ts";
import { RelayerStore } from "./chains/relayer-store.ts";
import { relayerTracker } from "./chains/relayer-tracker.ts";
import { TokenStates, tokenWatch } from "./chains/token-states.ts";
import { WalletDeployments } from "./chains/wallet-deployments.ts";
import { WalletSignatures } from "./chains/wallet-signatures.ts";
import { ChargeBatches } from "./charges/charge-batches.ts";
import { ChargeFailureEvents } from "./charges/charge-failure-events.ts";
import { chargeOutcomes } from "./charges/charge-outcomes.ts";
import { ChargeStore } from "./charges/charge-store.ts";
import { Charges } from "./charges/charges.ts";
import { holdReleaser } from "./charges/hold-releaser.ts";
import { API_LIMIT_DEFAULTS, PAGE_LIMIT_DEFAULTS, type ServiceConfig } from "./config/env.ts";
import { PublicUrl } from "./config/public-url.ts";
import { ClearedCaches } from "./db/cleared-caches.ts";
import { databaseLayer } from "./db/client.ts";
import { runMigrations } from "./db/migrations.ts";
import { Events } from "./events/events.ts";
import { Outbox } from "./events/outbox.ts";
import { FactApplication } from "./facts/fact-application.ts";
import { FactReader } from "./facts/fact-reader.ts";
import { factRelay } from "./facts/fact-relay.ts";
import { ledgerBackfill } from "./facts/ledger-backfill.ts";
import { ledgerReorgs } from "./facts/ledger-reorgs.ts";
import { RelayStore } from "./facts/relay-store.ts";
import { Idempotency } from "./idempotency/idempotency.ts";
import { idempotencyPurge } from "./idempotency/purge-worker.ts";
import { RequestLimits } from "./limits/request-limits.ts";
import { AuthorizationSessions } from "./mandates/authorization-session.ts";
import { AuthorizationLimits, Authorizations } from "./mandates/authorization-signing.ts";
import { MandateStore } from "./mandates/mandate-store.ts";
import { Mandates } from "./mandates/mandates.ts";
import { Revocations } from "./mandates/revocations.ts";
import { TokenReads } from "./mandates/token-reads.ts";
import { Merchants } from "./merchants/merchants.ts";
import { Metrics } from "./metrics/metrics.ts";
import { operatorGaugesLayer } from "./operations/operator-gauges.ts";
import { depositSweeper } from "./payments/deposit-sweeper.ts";
import { depositWatcher } from "./payments/deposit-watcher.ts";
import { GaslessPayers } from "./payments/gasless-payers.ts";
import { GaslessPayments } from "./payments/gasless-payments.ts";
import { OpenPaymentLimit, OpenPayments } from "./payments/open-payments.ts";
import { PaySessions } from "./payments/pay-session.ts";
import { paymentExpiry } from "./payments/payment-expiry.ts";
import { PaymentFacts } from "./payments/payment-facts.ts";
import { paymentReleaser } from "./payments/payment-releaser.ts";
import { PaymentRender } from "./payments/payment-render.ts";
import { paymentReorgs } from "./payments/payment-reorgs.ts";
import { PaymentStore } from "./payments/payment-store.ts";
import { PaymentTransitions } from "./payments/payment-transitions.ts";
import { Payments } from "./payments/payments.ts";
import { PortalActions } from "./portal/portal-actions.ts";
import { PortalSessionStore } from "./portal/portal-session-store.ts";
import { PortalSessions } from "./portal/portal-sessions.ts";
import { PortalViews } from "./portal/portal-view.ts";
import { Reconciliation } from "./reconciliation/reconciliation.ts";
import { PeriodReports } from "./reports/period-reports.ts";
import { invoiceSettlement, subscriptionBilling } from "./subscriptions/billing/billing-worker.ts";
import { Coupons } from "./subscriptions/coupons.ts";
import { InvoiceDrafts } from "./subscriptions/invoice-draft.ts";
import { InvoiceStore } from "./subscriptions/invoice-store.ts";
import { PlanChanges } from "./subscriptions/plan-changes.ts";
import { Prices } from "./subscriptions/prices.ts";
import { SubscriptionStore } from "./subscriptions/subscription-store.ts";
import { Subscriptions } from "./subscriptions/subscriptions.ts";
import { Usage } from "./subscriptions/usage.ts";
import { UsageStore } from "./subscriptions/usage-store.ts";
import { TestHelpers } from "./testing/test-helpers.ts";
import { TestPayments } from "./testing/test-payments.ts";
import { Deliveries } from "./webhooks/deliveries.ts";
import { DeliveryStore } from "./webhooks/delivery-store.ts";
import { dispatcherLayer } from "./webhooks/dispatcher.ts";
import { WebhookEndpoints } from "./webhooks/endpoints.ts";
import { webhookFanOut } from "./webhooks/fan-out.ts";
import { SecretBox } from "./webhooks/secret-box.ts";
import { AttemptSender } from "./webhooks/sender.ts";
import { runWorkers } from "./workers/runtime.ts";
import { X402Facilitator } from "./x402/facilitator.ts";

export const loggingLayer = (config: Pick<ServiceConfig, "logFormat" | "logLevel">) =>
  Layer.mergeAll(
    Logger.layer([config.logFormat === "json" ? Logger.consoleJson : Logger.consoleLogFmt]),
    Layer.succeed(References.MinimumLogLevel, config.logLevel),
    // No tracer exports spans, so none are built (@effect/sql-pg made one per statement, per request).
    Layer.succeed(References.TracerEnabled, false),
  );

/** Postgres, the chains and the process's configuration, with the schema migrated before anything uses it. */
export const infrastructureLayer = (config: ServiceConfig) => {
  const base = Layer.mergeAll(
    databaseLayer(config.databaseUrl, config.databasePoolSize),
    ChainHeads.layer().pipe(
      Layer.provideMerge(Layer.mergeAll(ChainRegistry.fromFile(config.chainsFile), ChainClients.layer)),
    ),
    PublicUrl.layer(config.publicUrl ?? `http://${config.host}:${config.port}`),
    SecretBox.layer(config.webhooks.secretsKey),
    Metrics.layer,
    ChainWatch.layer,
  );
  return Layer.provideMerge(Layer.effectDiscard(runMigrations), base);
};

/** The one writer of each table. */
export const storesLayer = Layer.mergeAll(
  BalanceStore.layer,
  GasCosts.layer,
  MandateStore.layer,
  ChargeStore.layer,
  RelayerStore.layer,
  RelayStore.layer,
  SubscriptionStore.layer,
  PortalSessionStore.layer,
  InvoiceStore.layer,
  UsageStore.layer,
  DeliveryStore.layer,
  PaymentStore.layer,
  GaslessPayers.layer,
);

/** What the service sends to and reads from chains beyond `ChainClients`: the relayer, token reads. */
export const chainEdgeLayer = (config: Pick<ServiceConfig, "relayerKey">) =>
  Layer.mergeAll(Relayer.layer, TokenReads.layer).pipe(
    Layer.provideMerge(RelayerAccount.layer(config.relayerKey)),
  );

/**
 * The domain services over given infrastructure, stores and chain edge (tests give fakes for the chain
 * and the relayer: test/domain/).
 */
export const servicesLayer = (
  config: Pick<ServiceConfig, "idempotencyRetentionHours" | "webhooks" | "page" | "apiLimits">,
) => {
  const apiLimits = config.apiLimits ?? API_LIMIT_DEFAULTS;
  const foundation = Layer.mergeAll(
    RequestLimits.layer(apiLimits),
    ConsoleSessions.layer.pipe(Layer.provideMerge(ApiKeys.layer), Layer.provideMerge(ClearedCaches.layer)),
    Merchants.layer,
    Reconciliation.layer,
    PeriodReports.layer,
    Events.layer,
    FactReader.layer,
    Idempotency.layer(Duration.hours(config.idempotencyRetentionHours)),
    Outbox.layer.pipe(Layer.provide(webhookFanOut)),
    RelayStore.payoutRegistrations,
    TokenStates.layer,
  );
  const chains = Layer.mergeAll(
    MerchantChains.layer,
    Coupons.layer,
    WalletSignatures.layer,
    WalletDeployments.layer,
  ).pipe(Layer.provideMerge(foundation));
  const catalogue = Layer.mergeAll(
    Mandates.layer,
    Prices.layer,
    WebhookEndpoints.layer({ allowPrivateInTest: config.webhooks.allowPrivateInTest }),
  ).pipe(Layer.provideMerge(chains));
  // Drafts read prices (usage recorded under an earlier price).
  const drafting = InvoiceDrafts.layer.pipe(Layer.provideMerge(catalogue));
  const limits = Layer.succeed(AuthorizationLimits, {
    transactionsPerMandatePerDay: (config.page ?? PAGE_LIMIT_DEFAULTS).authorizationsPerMandatePerDay,
  });
  const operations = Layer.mergeAll(
    ChargeFailureEvents.layer,
    AuthorizationSessions.layer,
    Authorizations.layer.pipe(Layer.provide(limits)),
    Revocations.layer.pipe(Layer.provide(limits)),
    Subscriptions.layer,
    Deliveries.layer,
  ).pipe(Layer.provideMerge(drafting));
  const charging = ChargeBatches.layer.pipe(Layer.provideMerge(operations));
  const charges = Layer.mergeAll(Charges.layer, Usage.layer, PlanChanges.layer).pipe(
    Layer.provideMerge(PortalActions.layer),
    Layer.provideMerge(PortalViews.layer),
    Layer.provideMerge(PortalSessions.layer),
    Layer.provideMerge(charging),
  );
  const openPayments = OpenPayments.layer.pipe(
    Layer.provide(Layer.succeed(OpenPaymentLimit, { perMerchantAndChain: apiLimits.openPaymentsPerChain })),
  );
  const payments = Layer.mergeAll(Payments.layer, PaymentFacts.layer, GaslessPayments.layer).pipe(
    Layer.provideMerge(openPayments),
    Layer.provideMerge(PaySessions.layer),
    Layer.provideMerge(PaymentTransitions.layer),
    Layer.provideMerge(PaymentRender.layer),
    Layer.provideMerge(charges),
  );
  const helpers = Layer.mergeAll(TestHelpers.layer, TestPayments.layer, X402Facilitator.layer).pipe(
    Layer.provideMerge(payments),
  );
  return FactApplication.layer.pipe(Layer.provideMerge(helpers));
};

/** Everything the routes and workers use. */
export const domainLayer = (config: ServiceConfig) =>
  servicesLayer(config).pipe(
    Layer.provideMerge(chainEdgeLayer(config)),
    Layer.provideMerge(storesLayer),
    Layer.provideMerge(infrastructureLayer(config)),
  );

/** The workers of a process, each run once. */
const workersLayer = (config: ServiceConfig) =>
  runWorkers([
    idempotencyPurge,
    factRelay,
    relayerTracker(Duration.seconds(config.relayerBumpAfterSeconds)),
    tokenWatch,
    holdReleaser,
    chargeOutcomes,
    depositWatcher,
    depositSweeper,
    paymentExpiry,
    paymentReleaser,
    paymentReorgs,
    ledgerReorgs,
    ledgerBackfill,
    subscriptionBilling,
    invoiceSettlement,
    indexerWatchdog({ stallSeconds: config.indexerStallSeconds ?? 60, ponderUrl: config.ponderUrl }),
  ]);

export const serviceLayer = (config: ServiceConfig) => {
  const domain = domainLayer(config);
  const dispatcher = dispatcherLayer({
    maxInFlight: config.webhooks.maxInFlight,
    maxInFlightPerEndpoint: config.webhooks.maxInFlightPerEndpoint,
    timeoutMs: config.webhooks.timeoutSeconds * 1000,
    allowPrivateInTest: config.webhooks.allowPrivateInTest,
  }).pipe(
    Layer.provide(
      AttemptSender.layer({
        timeoutMs: config.webhooks.timeoutSeconds * 1000,
        connectionsPerOrigin: config.webhooks.maxInFlightPerEndpoint,
      }),
    ),
  );
  const background = Layer.mergeAll(workersLayer(config), dispatcher, operatorGaugesLayer).pipe(
    Layer.provide(domain),
  );
  return Layer.mergeAll(domain, background).pipe(
    Layer.provide(loggingLayer(config)),
    Layer.merge(loggingLayer(config)),
  );
};
