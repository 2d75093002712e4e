/**
 * Gauges computed when Prometheus scrapes: each gauge's collect callback reads one snapshot, taken
 * once per scrape (concurrent callbacks share it) with a few counting statements, each answered from a
 * partial index, under a time limit, so a slow database yields a scrape without the database gauges
 * (and `billing_metrics_database_up 0`) instead of a hung one. Chain heads and relayer balances come
 * from the indexer watchdog's last check: a scrape never calls an RPC. A row that fails its schema is a
 * defect that fails the whole scrape, so ids that are `bigint` columns are cast to `int` in the SQL.
 */
import { Duration, Effect, Layer, Option, Ref, Schema } from "effect";
import { SqlClient } from "effect/sql";
import { Gauge } from "prom-client";
import { ChainClients } from "../chains/chain-clients.ts";
import { ChainWatch, type ChainWatchEntry, indexedHeads } from "../chains/indexer-watchdog.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { TokenStates, type TokenStatus } from "../chains/token-states.ts";
import { decodeRows } from "../db/rows.ts";
import { Metrics } from "../metrics/metrics.ts";

/** A scrape's database reads must end within this; Prometheus' own default timeout is 10 s. */
export const COLLECT_TIMEOUT = Duration.seconds(2);

interface DatabaseCounts {
  readonly deliveriesPending: number;
  readonly deliveriesFailed: number;
  readonly invoicesOpen: number;
  readonly relayerPending: ReadonlyMap<number, number>;
  /** Pending relayer transactions held back per chain, by reason (migration 0036). */
  readonly relayerHeld: ReadonlyArray<{
    readonly chainId: number;
    readonly kind: string;
    readonly n: number;
  }>;
  readonly subscriptionsDue: ReadonlyMap<number, number>;
  readonly depositsDue: ReadonlyMap<number, number>;
  /** Held-back transfers per chain, by what they are. */
  readonly heldBack: ReadonlyArray<{ readonly chainId: number; readonly kind: string; readonly n: number }>;
  readonly indexed: ReadonlyMap<number, { readonly number: bigint; readonly timestamp: number }>;
}

interface Snapshot {
  readonly chains: ReadonlyArray<ChainWatchEntry>;
  readonly tokens: ReadonlyArray<TokenStatus>;
  readonly database: Option.Option<DatabaseCounts>;
}

const Totals = Schema.Struct({
  deliveries_pending: Schema.NumberFromString,
  deliveries_failed: Schema.NumberFromString,
  invoices_open: Schema.NumberFromString,
});
const PerChain = Schema.Struct({ chain_id: Schema.Number, n: Schema.NumberFromString });
const decodeTotals = decodeRows(Totals);
const decodePerChain = decodeRows(PerChain);
const decodeHeldBack = decodeRows(
  Schema.Struct({ chain_id: Schema.Number, kind: Schema.String, n: Schema.NumberFromString }),
);

const perChain = (rows: ReadonlyArray<typeof PerChain.Type>) => new Map(rows.map((r) => [r.chain_id, r.n]));

/** Subscriptions are due at their chain's time, which only the watchdog's last check knows. */
const databaseCounts = (chains: ReadonlyArray<ChainWatchEntry>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const dueClauses = chains.flatMap((entry) =>
      entry.head === undefined
        ? []
        : [sql`(chain_id = ${entry.chainId} AND next_billing_at <= ${entry.head.timestamp})`],
    );
    const [totals, relayerPending, relayerHeld, subscriptionsDue, depositsDue, heldBack, indexed] =
      yield* Effect.all(
        [
          sql`SELECT
              (SELECT count(*) FROM billing.webhook_deliveries WHERE status = 'pending')::text AS deliveries_pending,
              (SELECT count(*) FROM billing.webhook_deliveries WHERE status = 'failed')::text AS deliveries_failed,
              (SELECT count(*) FROM billing.invoices WHERE status = 'open')::text AS invoices_open`.pipe(
            Effect.flatMap(decodeTotals),
          ),
          // chain_id is a bigint there, which the driver answers as text: without the cast, any pending
          // transaction made the row fail its schema and the whole scrape a 500.
          sql`SELECT chain_id::int AS chain_id, count(*)::text AS n FROM billing.relayer_transactions
            WHERE status = 'pending' AND carrier_id IS NULL GROUP BY chain_id`.pipe(
            Effect.flatMap(decodePerChain),
          ),
          // From the partial index relayer_transactions_held.
          sql`SELECT chain_id::int AS chain_id, held_reason AS kind, count(*)::text AS n
            FROM billing.relayer_transactions WHERE held_reason IS NOT NULL GROUP BY chain_id, held_reason`.pipe(
            Effect.flatMap(decodeHeldBack),
          ),
          dueClauses.length === 0
            ? Effect.succeed([])
            : sql`SELECT chain_id, count(*)::text AS n FROM billing.subscriptions
                WHERE status IN ('active', 'past_due') AND ${sql.or(dueClauses)}
                GROUP BY chain_id`.pipe(Effect.flatMap(decodePerChain)),
          sql`SELECT chain_id::int AS chain_id, count(*)::text AS n FROM billing.payments
            WHERE sweep_due GROUP BY chain_id`.pipe(Effect.flatMap(decodePerChain)),
          // Each from the partial index of its held-back items (migration 0031).
          sql`SELECT chain_id::int AS chain_id, 'charge_release' AS kind, count(*)::text AS n
              FROM billing.charges WHERE release_failure_code IS NOT NULL GROUP BY chain_id
            UNION ALL SELECT chain_id::int, 'payment_sweep', count(*)::text
              FROM billing.payments WHERE sweep_failure_code IS NOT NULL GROUP BY chain_id
            UNION ALL SELECT chain_id::int, 'payment_release', count(*)::text
              FROM billing.payments WHERE release_failure_code IS NOT NULL GROUP BY chain_id`.pipe(
            Effect.flatMap(decodeHeldBack),
          ),
          indexedHeads,
        ],
        { concurrency: "unbounded" },
      );
    const [total] = totals;
    return {
      deliveriesPending: total?.deliveries_pending ?? 0,
      deliveriesFailed: total?.deliveries_failed ?? 0,
      invoicesOpen: total?.invoices_open ?? 0,
      relayerPending: perChain(relayerPending),
      relayerHeld: relayerHeld.map((h) => ({ chainId: h.chain_id, kind: h.kind, n: h.n })),
      subscriptionsDue: perChain(subscriptionsDue),
      depositsDue: perChain(depositsDue),
      heldBack: heldBack.map((h) => ({ chainId: h.chain_id, kind: h.kind, n: h.n })),
      indexed,
    } satisfies DatabaseCounts;
  });

const takeSnapshot = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const watch = yield* ChainWatch;
  const entries = yield* Ref.get(watch.entries);
  const chains = registry.all.map(
    (chain): ChainWatchEntry =>
      entries.get(chain.id) ?? {
        chainId: chain.id,
        head: undefined,
        indexed: undefined,
        behindSince: undefined,
        stalled: false,
        relayerBalance: undefined,
      },
  );
  const tokens = yield* (yield* TokenStates).snapshot;
  const database = yield* databaseCounts(chains).pipe(
    Effect.timeout(COLLECT_TIMEOUT),
    Effect.tapCause((cause) => Effect.logWarning("metrics: database gauges not collected", cause)),
    Effect.option,
  );
  return { chains, tokens, database } satisfies Snapshot;
});

/** Registers the gauges in the runtime's registry; their callbacks run the snapshot on this context. */
export const operatorGaugesLayer = Layer.effectDiscard(
  Effect.gen(function* () {
    const metrics = yield* Metrics;
    const registry = yield* ChainRegistry;
    const clients = yield* ChainClients;
    const context = yield* Effect.context<SqlClient.SqlClient | ChainRegistry | ChainWatch | TokenStates>();
    const run = Effect.runPromiseWith(context);
    // One snapshot per scrape: every gauge's collect asks for it within the same moment (a monotonic
    // clock decides "the same moment"; nothing here is business time).
    let last: { readonly at: number; readonly snapshot: Promise<Snapshot> } | undefined;
    const snapshot = () => {
      const now = performance.now();
      if (last === undefined || now - last.at > 500) last = { at: now, snapshot: run(takeSnapshot) };
      return last.snapshot;
    };
    const registers = [metrics.registry];
    const gauge = <L extends string>(
      name: string,
      help: string,
      labelNames: readonly L[],
      fill: (set: (labels: Partial<Record<L, string>>, value: number) => void, snap: Snapshot) => void,
    ) =>
      new Gauge<L>({
        name,
        help,
        labelNames,
        registers,
        async collect() {
          const snap = await snapshot();
          this.reset();
          fill((labels, value) => this.set(labels, value), snap);
        },
      });
    const chainLabel = (entry: ChainWatchEntry) => ({ chain_id: String(entry.chainId) });
    const indexedOf = (snap: Snapshot, entry: ChainWatchEntry) =>
      Option.match(snap.database, {
        onNone: () => entry.indexed,
        onSome: (db) => db.indexed.get(entry.chainId),
      });
    gauge(
      "billing_metrics_database_up",
      "1 when this scrape's database reads succeeded in time.",
      [],
      (set, s) => set({}, Option.isSome(s.database) ? 1 : 0),
    );
    gauge(
      "billing_chain_head_block",
      "The chain's newest block, from its RPC at the watchdog's last check.",
      ["chain_id"],
      (set, s) => {
        for (const entry of s.chains) if (entry.head) set(chainLabel(entry), Number(entry.head.number));
      },
    );
    gauge(
      "billing_indexed_head_block",
      "The newest block the indexer has indexed.",
      ["chain_id"],
      (set, s) => {
        for (const entry of s.chains) {
          const indexed = indexedOf(s, entry);
          if (indexed) set(chainLabel(entry), Number(indexed.number));
        }
      },
    );
    gauge(
      "billing_indexer_lag_blocks",
      "How many blocks the indexed head is behind the chain's head.",
      ["chain_id"],
      (set, s) => {
        for (const entry of s.chains) {
          const indexed = indexedOf(s, entry);
          if (entry.head && indexed)
            set(chainLabel(entry), Math.max(0, Number(entry.head.number - indexed.number)));
        }
      },
    );
    gauge(
      "billing_indexer_lag_seconds",
      "Block time of the chain's head minus block time of the indexed head.",
      ["chain_id"],
      (set, s) => {
        for (const entry of s.chains) {
          const indexed = indexedOf(s, entry);
          if (entry.head && indexed)
            set(chainLabel(entry), Math.max(0, entry.head.timestamp - indexed.timestamp));
        }
      },
    );
    gauge(
      "billing_indexer_stalled",
      "1 while the chain moves on and its indexed head has not moved for INDEXER_STALL_SECONDS.",
      ["chain_id"],
      (set, s) => {
        for (const entry of s.chains) set(chainLabel(entry), entry.stalled ? 1 : 0);
      },
    );
    gauge(
      "billing_relayer_balance_wei",
      "The relayer account's native balance (pays the gas), at the watchdog's last check.",
      ["chain_id"],
      (set, s) => {
        for (const entry of s.chains)
          if (entry.relayerBalance !== undefined) set(chainLabel(entry), Number(entry.relayerBalance));
      },
    );
    gauge(
      "billing_rpc_url_usable",
      "1 while the chain's RPC URL takes calls: its head within rpc.max_lag_blocks of the best URL's (read every 15 s when the chain has several) and no failure in the last 30 s; 0 while set aside.",
      ["chain_id", "url"],
      (set) => {
        for (const chain of registry.all)
          clients.rpcUrls(chain).forEach((url, i) => {
            set({ chain_id: String(chain.id), url: `#${i} ${url.host}` }, url.lagging || url.failing ? 0 : 1);
          });
      },
    );
    gauge(
      "billing_relayer_transactions_pending",
      "Relayer transactions sent and not yet mined.",
      ["chain_id"],
      (set, s) =>
        Option.map(s.database, (db) => {
          for (const entry of s.chains) set(chainLabel(entry), db.relayerPending.get(entry.chainId) ?? 0);
        }),
    );
    gauge(
      "billing_relayer_transactions_held",
      "Pending relayer transactions held back, by reason: fee_ceiling (not sent: the base fee is above their fee cap, gas.max_fee_per_gas_wei), replacement_limit and budget (stuck and not replaced any more).",
      ["chain_id", "reason"],
      (set, s) =>
        Option.map(s.database, (db) => {
          for (const entry of s.chains)
            for (const reason of ["fee_ceiling", "replacement_limit", "budget"])
              set(
                { ...chainLabel(entry), reason },
                db.relayerHeld.find((h) => h.chainId === entry.chainId && h.kind === reason)?.n ?? 0,
              );
        }),
    );
    gauge(
      "billing_subscriptions_due",
      "Active or past-due subscriptions whose next billing time (chain time) has come.",
      ["chain_id"],
      (set, s) =>
        Option.map(s.database, (db) => {
          for (const entry of s.chains)
            if (entry.head) set(chainLabel(entry), db.subscriptionsDue.get(entry.chainId) ?? 0);
        }),
    );
    gauge(
      "billing_payment_deposits_due",
      "Payments whose deposit address has new funds the sweeper has not swept yet (a number that keeps growing: sweeps are stuck).",
      ["chain_id"],
      (set, s) =>
        Option.map(s.database, (db) => {
          for (const entry of s.chains) set(chainLabel(entry), db.depositsDue.get(entry.chainId) ?? 0);
        }),
    );
    gauge(
      "billing_token_paused",
      "1 while the token's issuer has it paused (nothing is sent for it on the chain), from the token watch's last read.",
      ["chain_id", "token"],
      (set, s) => {
        for (const t of s.tokens) set({ chain_id: String(t.chainId), token: t.symbol }, t.paused ? 1 : 0);
      },
    );
    gauge(
      "billing_transfers_held_back",
      "Releases and sweeps the chain refused alone (e.g. a blacklisted payout address), held back until cleared; kind: charge_release, payment_sweep, payment_release.",
      ["chain_id", "kind"],
      (set, s) =>
        Option.map(s.database, (db) => {
          for (const entry of s.chains)
            for (const kind of ["charge_release", "payment_sweep", "payment_release"])
              set(
                { ...chainLabel(entry), kind },
                db.heldBack.find((h) => h.chainId === entry.chainId && h.kind === kind)?.n ?? 0,
              );
        }),
    );
    gauge("billing_invoices_open", "Invoices open (not yet paid, uncollectible or void).", [], (set, s) =>
      Option.map(s.database, (db) => set({}, db.invoicesOpen)),
    );
    gauge(
      "billing_webhook_deliveries",
      "Webhook deliveries by status: pending (to be attempted) and failed (gave up after every retry).",
      ["status"],
      (set, s) =>
        Option.map(s.database, (db) => {
          set({ status: "pending" }, db.deliveriesPending);
          set({ status: "failed" }, db.deliveriesFailed);
        }),
    );
  }),
);
