/**
 * Operator metrics (Prometheus, with prom-client). One registry per service runtime, so two service
 * processes in one Node process (tests) never share or double-register series. This module holds the
 * instruments that code updates as things happen (counters, histograms); the gauges read from Postgres
 * and the chains at scrape time are in `operations/operator-gauges.ts`.
 *
 * To count something new: add the instrument to `makeInstruments` and update it where it happens with
 * `recordMetric((m) => m.yourCounter.inc({ chain_id: String(chainId) }))`. That is a no-op where the
 * runtime has no `Metrics` (unit tests that build only part of the service). HTTP series are labelled
 * by Hono's matched route template (`unmatched` otherwise), so their label sets stay bounded.
 */
import { Context, Effect, Layer, Option } from "effect";
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from "prom-client";

const makeInstruments = (registry: Registry) => {
  const registers = [registry];
  return {
    httpRequests: new Counter({
      name: "billing_http_requests_total",
      help: "HTTP requests answered, by method, route template (unmatched: no route) and status.",
      labelNames: ["method", "route", "status"] as const,
      registers,
    }),
    httpDuration: new Histogram({
      name: "billing_http_request_duration_seconds",
      help: "Time to answer an HTTP request, by method, route template and status.",
      labelNames: ["method", "route", "status"] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    webhookAttemptDuration: new Histogram({
      name: "billing_webhook_attempt_duration_seconds",
      help: "Webhook delivery attempts: time from connect to answer (or error), by outcome (success: 2xx).",
      labelNames: ["outcome"] as const,
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    // Hooks for the relayer's budget and the fact relay (updated by their modules).
    relayerBudgetRefusals: new Counter({
      name: "billing_relayer_budget_refusals_total",
      help: "Relayer transactions refused because the chain's relayer budget was exhausted.",
      labelNames: ["chain_id"] as const,
      registers,
    }),
    relayerShareRefusals: new Counter({
      name: "billing_relayer_share_refusals_total",
      help: "Relayer transactions refused because a merchant they served had spent its share of the chain's hourly relayer budget (relayer_merchant_share).",
      labelNames: ["chain_id"] as const,
      registers,
    }),
    gaslessRefusals: new Counter({
      name: "billing_gasless_refusals_total",
      help: "Gasless transfers (the pay page's authorizations) refused for their payer, by reason: in_flight (another of the payer's on the token still pending), cooling_off (a transfer or wallet deployment of the payer reverted within gasless_cooling_off_seconds), reserved (the payer's balance less what its pending transfers move is below the value).",
      labelNames: ["chain_id", "reason"] as const,
      registers,
    }),
    relayerFloorRefusals: new Counter({
      name: "billing_relayer_floor_refusals_total",
      help: "Relayer transactions refused because the relayer's balance on the chain was below gas.min_balance_wei.",
      labelNames: ["chain_id"] as const,
      registers,
    }),
    relayerFeeCeilingHolds: new Counter({
      name: "billing_relayer_fee_ceiling_holds_total",
      help: "Relayer transactions held back (recorded, not sent) because the chain's base fee was above their fee cap, bounded by gas.max_fee_per_gas_wei.",
      labelNames: ["chain_id"] as const,
      registers,
    }),
    relayerReplacements: new Counter({
      name: "billing_relayer_replacements_total",
      help: "Stuck relayer transactions replaced with higher fees.",
      labelNames: ["chain_id"] as const,
      registers,
    }),
    relayerReplacementsHeld: new Counter({
      name: "billing_relayer_replacements_held_total",
      help: "Stuck relayer transactions left unreplaced, by reason: fee_ceiling (no 10% room under the ceiling), replacement_limit (gas.max_replacements reached), budget (the raised fees would pass the hourly budget).",
      labelNames: ["chain_id", "reason"] as const,
      registers,
    }),
    relayerGasSpent: new Counter({
      name: "billing_relayer_gas_spent_wei_total",
      help: "Wei of the chain's native currency the relayer paid for its mined and reverted transactions (gas used × effective price + L1 fee), as their receipts were recorded by this process. Exact totals: `npm run cli -- gas totals`.",
      labelNames: ["chain_id", "native_currency"] as const,
      registers,
    }),
    relayerBalanceLow: new Gauge({
      name: "billing_relayer_balance_low",
      help: "1 while the relayer's balance on the chain is below gas.low_balance_wei (or its floor).",
      labelNames: ["chain_id"] as const,
      registers,
    }),
    relayerBalanceBelowFloor: new Gauge({
      name: "billing_relayer_balance_below_floor",
      help: "1 while the relayer's balance on the chain is below gas.min_balance_wei: new transactions are refused.",
      labelNames: ["chain_id"] as const,
      registers,
    }),
    relaySkippedFacts: new Counter({
      name: "billing_relay_skipped_facts_total",
      help: "Chain facts the fact relay skipped (not reported as events), by reason.",
      labelNames: ["chain_id", "reason"] as const,
      registers,
    }),
    workerPasses: new Counter({
      name: "billing_worker_passes_total",
      help: "Background worker passes finished, by worker and outcome (success, failure).",
      labelNames: ["worker", "outcome"] as const,
      registers,
    }),
    authorizationsWaiting: new Gauge({
      name: "billing_relayer_authorizations_waiting",
      help: "Customers' authorisations waiting in the chain's collector for their authorizeMany group.",
      labelNames: ["chain_id"] as const,
      registers,
    }),
  };
};

export type Instruments = ReturnType<typeof makeInstruments>;

export class Metrics extends Context.Service<
  Metrics,
  Instruments & {
    readonly registry: Registry;
  }
>()("Metrics") {
  static readonly layer = Layer.sync(Metrics, () => {
    const registry = new Registry();
    // Node's own: memory, CPU, event loop delay, handles.
    collectDefaultMetrics({ register: registry });
    return { registry, ...makeInstruments(registry) };
  });
}

/** Updates the process's metrics, when the runtime has them. */
export const recordMetric = (update: (metrics: Instruments) => void): Effect.Effect<void> =>
  Effect.flatMap(Effect.serviceOption(Metrics), (metrics) =>
    Option.isSome(metrics) ? Effect.sync(() => update(metrics.value)) : Effect.void,
  );

/** One answered HTTP request, labelled by its route's template (bounded: never the raw path). */
export const observeRequest = (
  metrics: Instruments,
  request: {
    readonly method: string;
    readonly route: string;
    readonly status: number;
    readonly seconds: number;
  },
): void => {
  const labels = { method: request.method, route: request.route, status: String(request.status) };
  metrics.httpRequests.inc(labels);
  metrics.httpDuration.observe(labels, request.seconds);
};
