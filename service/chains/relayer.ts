/**
 * The relayer: the service's account pays every escrow transaction's gas. Its parts, each a module:
 * keys and signing (relayer-account.ts), fees within the chain's ceiling (relayer-fees.ts), the hourly
 * budget (relayer-budget.ts, relayer-spending.ts), the balance's thresholds (relayer-balance.ts), the
 * steps of a submission (relayer-submission.ts), authorisation groups (relayer-groups.ts), the records
 * (relayer-store.ts, relayer-locks.ts, relayer-nonces.ts) and the tracking of what was sent
 * (relayer-tracker.ts, relayer-tracking.ts, relayer-resend.ts).
 * - Idempotent: a transaction is named by its purpose (unique per chain); submitting the same purpose
 *   twice, from two replicas or after a restart, returns the first transaction.
 * - Nonces: from the account's nonce sequence, at least the node's pending count. A submission holds
 *   the account's advisory lock only shared, so parallel callers (the billing round's charge batches)
 *   never wait for each other's transactions; the tracker's gap filling takes it exclusively.
 * - Simulated first: a transaction that would revert fails its gas measurement, so it is never recorded
 *   or sent (no gas spent). A caller that just ran the same call that way passes the gas it used instead.
 * - Committed before broadcast: the signed bytes are stored first (inside the caller's transaction, when
 *   there is one, and broadcast after it commits), so a lost broadcast is healed by the tracker, which
 *   re-sends the same bytes or replaces them with higher fees, within the chain's bounds.
 * - Attempts: an action that may need several transactions (a return, an authorization) names itself
 *   with `action`; a new attempt is sent only when none is pending or mined.
 * - Fees: read once per chain head (the base fee changes only with a block), so submissions of one
 *   block share one read; the node's pending count is still read per submission (it is the only guard
 *   against another holder of the key, whose transaction a cached count would miss).
 * - Shares: each merchant's transactions may take only its share of the hourly budget
 *   (relayer-shares.ts); batch senders skip the merchants `skippedMerchants` names (refused by this
 *   process, until the time its refusal gave).
 */
import { Clock, Context, Duration, Effect, Layer, Option } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { skippedActions } from "./authorization-groups.ts";
import { ChainClients } from "./chain-clients.ts";
import { ChainRegistry } from "./registry.ts";
import { RelayerAccount, RelayerError } from "./relayer-account.ts";
import { RelayerBalances } from "./relayer-balance.ts";
import { RelayerFees } from "./relayer-fees.ts";
import { makeAuthorizationGroups } from "./relayer-groups.ts";
import { RelayerStore } from "./relayer-store.ts";
import {
  answering,
  makeSubmissionSteps,
  noRelayerKey,
  type RelayedTransaction,
  type RelayerSubmission,
  toRelayed,
} from "./relayer-submission.ts";

export { RelayerError } from "./relayer-account.ts";
export { relayerBudget, relayerBudgetExhausted } from "./relayer-budget.ts";
export { GROUP_MAX, GROUPS_IN_FLIGHT, type GroupedAuthorization } from "./relayer-groups.ts";
export type { RelayedTransaction, RelayerSubmission } from "./relayer-submission.ts";

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const registry = yield* ChainRegistry;
  const clients = yield* ChainClients;
  const account = yield* RelayerAccount;
  const store = yield* RelayerStore;
  const steps = yield* makeSubmissionSteps;
  const groups = yield* makeAuthorizationGroups(steps);
  const since = (ms: number) => Effect.map(Clock.currentTimeMillis, (now) => new Date(now - ms));
  /** Merchants this process's submissions were refused for their share, by chain: until when (ms). */
  const refusedShares = new Map<number, Map<string, number>>();
  const noteShareRefusal = (chainId: number, error: RelayerError) =>
    error.reason !== "merchant_share_exhausted"
      ? Effect.void
      : Effect.map(Clock.currentTimeMillis, (now) => {
          const ofChain = refusedShares.get(chainId) ?? new Map<string, number>();
          refusedShares.set(chainId, ofChain);
          for (const merchant of error.merchants ?? [])
            ofChain.set(merchant, now + (error.retryAfterSeconds ?? 60) * 1000);
        });

  const find = (chainId: number, purpose: string) =>
    Effect.map(store.byPurpose(chainId, purpose), (row) => row && toRelayed(row));
  const findAction = (chainId: number, action: string) =>
    Effect.map(store.latestOfAction(chainId, action), (row) => row && toRelayed(row));

  /** The transaction that already answers a submission: its purpose, or a live attempt of its action. */
  const existing = (chainId: number, tx: RelayerSubmission) =>
    tx.action === undefined
      ? find(chainId, tx.purpose)
      : Effect.map(store.byPurposeOrAction(chainId, [{ purpose: tx.purpose, action: tx.action }]), (found) =>
          answering(found.get(0), tx.purpose),
        );

  const submit = (
    chainId: number,
    tx: RelayerSubmission,
  ): Effect.Effect<RelayedTransaction, RelayerError | SqlError.SqlError> =>
    Effect.gen(function* () {
      const chain = registry.byId(chainId);
      if (!chain) return yield* new RelayerError({ reason: "unknown_chain", message: `no chain ${chainId}` });
      const address = account.address(chainId);
      const from = account.from(chainId);
      if (address === undefined || from === undefined) return yield* noRelayerKey();
      const answered = yield* existing(chainId, tx);
      if (answered) return answered;
      const gas = tx.gasUsed ?? (yield* steps.measure(chain, address, tx.to, tx.data));
      const prepared = yield* steps.prepare(chain, address, from, tx.purpose);
      return yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* store.holdSubmission(chainId, from, tx.purpose, tx.action ?? null);
          const again = yield* existing(chainId, tx);
          if (again) return again;
          return toRelayed(yield* steps.signAndRecord(chain, from, prepared, gas, tx));
        }),
      );
    }).pipe(
      Effect.tapError((error) =>
        error._tag === "RelayerError" ? noteShareRefusal(chainId, error) : Effect.void,
      ),
    );

  /**
   * The merchants whose objects a batch sender leaves for later on a chain: this process's submissions
   * were refused for their share, and the time the refusal gave has not passed. (Kept in memory: a
   * process learns a merchant's refusal from its own first batch that includes the merchant, which the
   * batch senders then send without that merchant's items.)
   */
  const skippedMerchants = (chainId: number) =>
    Effect.map(Clock.currentTimeMillis, (now): ReadonlyArray<string> => {
      const refused = refusedShares.get(chainId);
      if (refused === undefined) return [];
      for (const [merchant, until] of refused) if (until <= now) refused.delete(merchant);
      return [...refused.keys()];
    });

  /** How many attempts of actions starting with `prefix` were sent in the last `window`, and when the oldest of them ends its window. */
  const recentActions = (chainId: number, prefix: string, window: Duration.Input) =>
    Effect.gen(function* () {
      const ms = Duration.toMillis(Duration.fromInputUnsafe(window));
      const { count, oldest } = yield* store.actionsSince(chainId, prefix, yield* since(ms));
      const now = yield* Clock.currentTimeMillis;
      return {
        count,
        retryAfterSeconds: oldest === null ? 0 : Math.max(1, Math.ceil((oldest.getTime() + ms - now) / 1000)),
      };
    });

  /** Waits for a receipt of any of the purpose's transactions; undefined after the timeout. */
  const waitMined = (chainId: number, purpose: string, timeout: Duration.Input) =>
    Effect.gen(function* () {
      const chain = registry.byId(chainId);
      if (!chain) return undefined;
      const client = clients.client(chain);
      for (;;) {
        const tx = yield* find(chainId, purpose);
        for (const hash of tx?.hashes ?? []) {
          const receipt = yield* account
            .rpc("receipt", () => client.getTransactionReceipt({ hash }))
            .pipe(Effect.option);
          if (Option.isSome(receipt)) {
            // An item of an authorizeMany that the escrow skipped failed though its transaction did not.
            const skipped =
              tx?.action != null &&
              skippedActions(chain.id, chain.escrow.address, receipt.value.logs).includes(tx.action);
            return {
              hash,
              status:
                receipt.value.status === "success" && !skipped ? ("mined" as const) : ("reverted" as const),
              blockNumber: Number(receipt.value.blockNumber),
            };
          }
        }
        yield* Effect.sleep("100 millis");
      }
    }).pipe(Effect.timeoutOption(timeout), Effect.map(Option.getOrUndefined));

  return {
    /** The relayer's address on a chain (the sender of its transactions); undefined without a key. */
    address: account.address,
    /** The operator new terms name on a chain (see RelayerAccount). */
    operator: account.operator,
    actsFor: account.actsFor,
    submit,
    submitAuthorization: groups.submitAuthorization,
    skippedMerchants,
    find,
    findAction,
    recentActions,
    waitMined,
  };
});

/**
 * The relayer with the fee reader and balance watch it shares with the tracker and the watchdog (the
 * layer provides them too).
 */
export class Relayer extends Context.Service<Relayer>()("Relayer", { make }) {
  static readonly layer = Layer.effect(Relayer, make).pipe(
    Layer.provideMerge(Layer.mergeAll(RelayerFees.layer, RelayerBalances.layer)),
  );
}
