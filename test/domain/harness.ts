/**
 * The domain on a real Postgres with the chain swapped out: `ChainClients`, `Relayer` and `TokenReads`
 * are fakes driven by the test (chain time, which mandates' charges revert, what the relayer was asked
 * to send), everything else is the service's own layers (`servicesLayer`, `storesLayer`). Billing
 * steps, dunning and batch charges run in milliseconds, without anvil or the indexer.
 */
import { randomUUID } from "node:crypto";
import { PgClient } from "@effect/sql-pg";
import { Effect, Layer, ManagedRuntime, Option, Redacted } from "effect";
import { SqlClient } from "effect/sql";
import type { Hex } from "viem";
import { inject } from "vitest";
import { waitFor } from "../../scripts/stack/wait.ts";
import { ChainClients, ChainUnavailable, EscrowRevert } from "../../service/chains/chain-clients.ts";
import { ChainHeads } from "../../service/chains/chain-heads.ts";
import type { ResolvedChain } from "../../service/chains/config.ts";
import { ChainRegistry } from "../../service/chains/registry.ts";
import {
  type RelayedTransaction,
  Relayer,
  RelayerError,
  type RelayerSubmission,
} from "../../service/chains/relayer.ts";
import { RelayerStore } from "../../service/chains/relayer-store.ts";
import { PublicUrl } from "../../service/config/public-url.ts";
import { databaseLayer } from "../../service/db/client.ts";
import { runMigrations } from "../../service/db/migrations.ts";
import { servicesLayer, storesLayer } from "../../service/layers.ts";
import { TokenReads } from "../../service/mandates/token-reads.ts";
import { Metrics } from "../../service/metrics/metrics.ts";
import { generateSecretsKey, SecretBox } from "../../service/webhooks/secret-box.ts";

export const CHAIN: ResolvedChain = {
  id: 31337,
  name: "Fake chain",
  livemode: false,
  rpc: { http: ["http://127.0.0.1:9"] },
  escrow: { address: "0x00000000000000000000000000000000000e5c20", start_block: 0 },
  tokens: [{ symbol: "USDC", decimals: 6, address: "0x000000000000000000000000000000000000dc01" }],
  subscriptions_available: true,
  payments_available: true,
  escrow_available: false,
  hold_seconds: 0,
  confirmations: 0,
};
export const RELAYER = "0x0000000000000000000000000000000000000e1a" as const;

/** What the fake chain says, and what it was asked. */
export interface FakeChain {
  /** Chain time, unix seconds: billing's clock. */
  time: number;
  /** Escrow mandate ids (lower case) whose charges revert, with the escrow's error name. */
  readonly failing: Map<string, string>;
  /** Every simulation asked: the function and how many charges it carried. */
  readonly simulations: { readonly functionName: string; readonly charges: number }[];
  /** Every gas measurement asked (a run that also tells whether the call succeeds). */
  readonly measurements: { readonly functionName: string; readonly charges: number }[];
  /** Every transaction the relayer was asked to send. */
  readonly sent: RelayerSubmission[];
  /** Merchants whose share of the relayer's budget is spent: a submission serving one is refused. */
  readonly spentShares: Set<string>;
}

export const fakeChain = (time: number): FakeChain => ({
  time,
  failing: new Map(),
  simulations: [],
  measurements: [],
  sent: [],
  spentShares: new Set(),
});

const fakeChainClients = (state: FakeChain) =>
  Layer.succeed(ChainClients, {
    client: () => {
      throw new Error("the fake chain has no RPC client");
    },
    latestTime: () => Effect.sync(() => state.time),
    latestBlock: () => Effect.sync(() => ({ number: BigInt(state.time), timestamp: state.time })),
    simulateEscrow: (_chain, _from, functionName, args) =>
      Effect.flatMap(outcome(state, functionName, args), (revert) =>
        revert ? Effect.fail(revert) : Effect.void,
      ),
    measureEscrow: (chain, _from, functionName, args) =>
      Effect.suspend(() => {
        const ids = chargedIds(functionName, args);
        state.measurements.push({ functionName, charges: ids.length });
        return ids.some((id) => state.failing.has(id.toLowerCase()))
          ? Effect.fail(new ChainUnavailable({ chainId: chain.id, message: "execution reverted" }))
          : Effect.succeed(GAS_PER_CHARGE * BigInt(ids.length));
      }),
    measureCall: (chain) =>
      Effect.fail(new ChainUnavailable({ chainId: chain.id, message: "fake chain: no gas measurement" })),
    simulateOutcome: (_chain, _from, functionName, args) => outcome(state, functionName, args),
    rpc: (chain, what) =>
      Effect.fail(new ChainUnavailable({ chainId: chain.id, message: `fake chain: no ${what}` })),
    rpcUrls: () => [],
  });

/** What the fake chain's measurement says a charge uses. */
export const GAS_PER_CHARGE = 30_000n;

const chargedIds = (functionName: string, args: readonly unknown[]): readonly Hex[] =>
  functionName === "chargeMany"
    ? (args[0] as readonly Hex[])
    : functionName === "charge"
      ? [args[0] as Hex]
      : [];

const outcome = (state: FakeChain, functionName: string, args: readonly unknown[]) =>
  Effect.sync(() => {
    const ids = chargedIds(functionName, args);
    state.simulations.push({ functionName, charges: ids.length });
    const failing = ids.map((id) => state.failing.get(id.toLowerCase())).find((name) => name !== undefined);
    return failing === undefined ? undefined : new EscrowRevert({ errorName: failing, message: failing });
  });

const fakeRelayer = (state: FakeChain) => {
  const sent = new Map<string, RelayedTransaction>();
  return Layer.succeed(Relayer, {
    address: () => RELAYER,
    operator: () => RELAYER,
    actsFor: (_chain, operator) => operator.toLowerCase() === RELAYER,
    submit: (chainId, tx) =>
      Effect.suspend(() => {
        const refused = [...new Set(tx.merchants ?? [])].filter((m) => state.spentShares.has(m));
        return refused.length === 0
          ? Effect.void
          : Effect.fail(
              new RelayerError({
                reason: "merchant_share_exhausted",
                message: "the fake relayer: their share is spent",
                merchants: refused,
                retryAfterSeconds: 60,
              }),
            );
      }).pipe(
        Effect.map(() => {
          const known = sent.get(tx.purpose);
          if (known) return known;
          state.sent.push(tx);
          const hash = `0x${sent.size.toString(16).padStart(64, "0")}` as Hex;
          const relayed: RelayedTransaction = {
            id: `rtx_${randomUUID()}`,
            chainId,
            nonce: sent.size,
            hash,
            hashes: [hash],
            purpose: tx.purpose,
            action: tx.action ?? null,
            status: "pending",
            blockNumber: null,
          };
          sent.set(tx.purpose, relayed);
          return relayed;
        }),
      ),
    submitAuthorization: () => Effect.die(new Error("the billing domain tests send no authorisations")),
    skippedMerchants: () => Effect.succeed([]),
    find: (_chainId, purpose) => Effect.sync(() => sent.get(purpose)),
    findAction: () => Effect.succeed(undefined),
    recentActions: () => Effect.succeed({ count: 0, retryAfterSeconds: 0 }),
    waitMined: () => Effect.succeed(undefined),
  });
};

/** A customer who holds plenty and let the escrow take it (no permit). */
const fakeTokenReads = Layer.succeed(TokenReads, {
  domain: () => Effect.succeed(Option.none()),
  permitDomain: () => Effect.succeed(Option.none()),
  permitNonce: () => Effect.succeed(0n),
  allowance: () => Effect.succeed(10n ** 30n),
  balance: () => Effect.succeed(10n ** 30n),
});

/** A database of the test file's own on the domain tests' Postgres. */
export const freshDatabase = async (prefix: string): Promise<string> => {
  const admin = inject("postgresUrl");
  const name = `${prefix}_${randomUUID().replaceAll("-", "").slice(0, 12)}`;
  await Effect.runPromise(
    Effect.flatMap(SqlClient.SqlClient, (sql) => sql`CREATE DATABASE ${sql(name)}`).pipe(
      Effect.provide(PgClient.layer({ url: Redacted.make(admin), maxConnections: 1 })),
    ),
  );
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return url.toString();
};

/** The relayer's store alone, on a migrated database of the test file's own with `connections` connections. */
export const relayerStoreRuntime = async (prefix: string, connections: number) => {
  const database = databaseLayer(await freshDatabase(prefix), connections);
  return ManagedRuntime.make(
    RelayerStore.layer.pipe(
      Layer.provideMerge(Layer.provideMerge(Layer.effectDiscard(runMigrations), database)),
    ),
  );
};
export type RelayerStoreRuntime = Awaited<ReturnType<typeof relayerStoreRuntime>>;

/** The service's domain on `databaseUrl`, with the fake chain `state`. */
export const domainTestLayer = (databaseUrl: string, state: FakeChain) => {
  const base = Layer.mergeAll(
    databaseLayer(databaseUrl, 5),
    // The fake chain's time moves without blocks: every request reads it, as from a chain not watched.
    ChainHeads.layer({ pollEveryMillis: 60_000, maxAgeMillis: 0 }).pipe(
      Layer.provideMerge(Layer.mergeAll(ChainRegistry.fromChains([CHAIN]), fakeChainClients(state))),
    ),
    PublicUrl.layer("http://127.0.0.1:4242"),
    SecretBox.layer(Redacted.make(generateSecretsKey())),
    Metrics.layer,
  );
  const infrastructure = Layer.provideMerge(Layer.effectDiscard(runMigrations), base);
  return servicesLayer({
    idempotencyRetentionHours: 24,
    webhooks: {
      secretsKey: Redacted.make(""),
      allowPrivateInTest: true,
      timeoutSeconds: 10,
      maxInFlight: 1,
      maxInFlightPerEndpoint: 1,
    },
  }).pipe(
    Layer.provideMerge(Layer.mergeAll(fakeRelayer(state), fakeTokenReads)),
    Layer.provideMerge(storesLayer),
    Layer.provideMerge(infrastructure),
  );
};

/**
 * Waits (in real time, also under the TestClock) until `count` lock requests of this test's database
 * wait (`kind`: advisory locks, or any), so that a test goes on once a fiber is seen blocked in
 * Postgres, never after a pause it hopes is long enough.
 */
export const lockWaits = (count: number, kind: "advisory" | "any" = "any") =>
  Effect.gen(function* () {
    const run = Effect.runPromiseWith(yield* Effect.context<SqlClient.SqlClient>());
    const waiting = Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const [row] = yield* sql<{ waiting: number }>`SELECT count(*)::int AS waiting FROM pg_locks
        WHERE NOT granted AND (${kind} = 'any' OR locktype = ${kind})
          AND pid IN (SELECT pid FROM pg_stat_activity WHERE datname = current_database())`;
      return (row?.waiting ?? 0) >= count;
    });
    yield* Effect.promise(() =>
      waitFor(() => run(waiting), {
        timeoutMs: 20_000,
        intervalMs: 10,
        what: `${count} lock requests waiting`,
      }),
    );
  });
