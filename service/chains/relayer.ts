/**
 * The relayer: the service's account pays every escrow transaction's gas.
 * - Idempotent: a transaction is named by its purpose (unique per chain); submitting the same purpose
 *   twice, from two replicas or after a restart, returns the first transaction.
 * - Nonces: from the account's nonce sequence (relayer-store.ts), at least the node's pending count. A
 *   submission holds the account's advisory lock only shared, so parallel callers (the billing round's
 *   charge batches) never wait for each other's transactions; the tracker's gap filling takes it
 *   exclusively.
 * - Simulated first: a transaction that would revert fails `eth_createAccessList`, so it is never recorded or
 *   sent (no gas spent). A caller that just ran the same call that way passes the gas it used instead.
 * - Committed before broadcast: the signed bytes are stored first (inside the caller's transaction, when
 *   there is one, and broadcast after it commits), so a lost broadcast is healed by the tracker
 *   (relayer-tracker.ts), which re-sends the same bytes or replaces them with higher fees.
 * - Attempts: an action that may need several transactions (a return, an authorization) names itself
 *   with `action`; a new attempt is sent only when none is pending or mined.
 * - Budget: each chain's relayer spends at most `relayer_budget_wei_per_hour` (gas limit × max fee until
 *   mined, then gas used × price) over any hour, counted by the minute (a transaction counts for up to
 *   a minute more than its hour); beyond it `submit` refuses with `budget_exhausted`. Submissions in
 *   flight at the same moment do not see each other's cost, so the budget can be passed by at most
 *   their number times one transaction's cost.
 * - Fees: read once per chain head (the base fee changes only with a block), so submissions of one
 *   block share one read; the node's pending count is still read per submission (it is the only guard
 *   against another holder of the key, whose transaction a cached count would miss).
 */
import { Clock, Context, Duration, Effect, Layer, Option } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import type { Hex } from "viem";
import { outsideTransaction } from "../db/client.ts";
import { Unavailable } from "../errors.ts";
import { recordMetric } from "../metrics/metrics.ts";
import { ChainClients } from "./chain-clients.ts";
import { ChainHeads } from "./chain-heads.ts";
import { DEFAULT_RELAYER_BUDGET_WEI_PER_HOUR, type ResolvedChain } from "./config.ts";
import { ChainRegistry } from "./registry.ts";
import { RelayerAccount, RelayerError } from "./relayer-account.ts";
import { RelayerStore, type TransactionRow } from "./relayer-store.ts";
import { gasLimitForUsed, withinBudget } from "./relayer-tracking.ts";

export { RelayerError } from "./relayer-account.ts";

/** What an API request answers when the relayer refused for the budget: 503, retry later. */
export const relayerBudgetExhausted = new Unavailable({
  code: "relayer_budget_exhausted",
  message:
    "This service's gas budget for the chain is spent for now, so nothing was sent or recorded. Retry later.",
});

/** The relayer's hourly spending limit on a chain, in wei. */
export const relayerBudget = (chain: ResolvedChain): bigint =>
  chain.relayer_budget_wei_per_hour === undefined
    ? DEFAULT_RELAYER_BUDGET_WEI_PER_HOUR
    : BigInt(chain.relayer_budget_wei_per_hour);

export interface RelayerSubmission {
  readonly to: Hex;
  readonly data: Hex;
  /** Names this transaction: submitting the same purpose again returns it. */
  readonly purpose: string;
  /**
   * The action this transaction is one attempt of: while an attempt is pending or mined, submitting
   * another purpose of the same action returns that attempt instead of sending a second one.
   */
  readonly action?: string;
  /**
   * Gas the caller's own run of exactly this call used (`ChainClients.measureEscrow`), so the relayer
   * does not run it again; without it the relayer measures.
   */
  readonly gasUsed?: bigint;
}

export interface RelayedTransaction {
  readonly id: string;
  readonly chainId: number;
  readonly nonce: number;
  readonly hash: Hex;
  readonly hashes: readonly Hex[];
  readonly purpose: string;
  readonly action: string | null;
  readonly status: "pending" | "mined" | "reverted" | "superseded";
  readonly blockNumber: number | null;
}

const toRelayed = (row: TransactionRow): RelayedTransaction => ({
  id: row.id,
  chainId: row.chain_id,
  nonce: row.nonce,
  hash: row.hashes[row.hashes.length - 1] as Hex,
  hashes: row.hashes as Hex[],
  purpose: row.purpose,
  action: row.action,
  status: row.status,
  blockNumber: row.block_number === null ? null : Number(row.block_number),
});

const HOUR_MS = 3_600_000;

interface Fees {
  readonly maxFeePerGas: bigint;
  readonly maxPriorityFeePerGas: bigint;
}

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const registry = yield* ChainRegistry;
  const clients = yield* ChainClients;
  const account = yield* RelayerAccount;
  const store = yield* RelayerStore;
  const heads = yield* ChainHeads;
  const since = (ms: number) => Effect.map(Clock.currentTimeMillis, (now) => new Date(now - ms));

  // Each chain's nonce sequence exists before the first submission (created outside any caller's
  // transaction); a chain seen later gets its own on first use.
  const sequences = new Set<number>();
  const ensureNonces = (chainId: number, from: string) =>
    sequences.has(chainId)
      ? Effect.void
      : outsideTransaction(store.ensureNonceSequence(chainId, from)).pipe(
          Effect.provideService(SqlClient.SqlClient, sql),
          Effect.tap(() => Effect.sync(() => sequences.add(chainId))),
        );
  for (const chain of registry.all)
    if (account.from !== undefined) yield* ensureNonces(chain.id, account.from);

  // The fees read at each chain's newest head, shared by every submission until the next head.
  const feesAtHead = new Map<
    number,
    { readonly head: bigint; readonly fees: Effect.Effect<Fees, RelayerError> }
  >();
  const readFees = (chain: ResolvedChain) =>
    account.rpc("fees", () => clients.client(chain).estimateFeesPerGas());
  const currentFees = (chain: ResolvedChain) =>
    Effect.gen(function* () {
      const head = yield* heads.latestBlock(chain).pipe(Effect.option);
      if (Option.isNone(head)) return yield* readFees(chain);
      const known = feesAtHead.get(chain.id);
      if (known !== undefined && known.head === head.value.number) return yield* known.fees;
      const once = yield* Effect.cached(readFees(chain));
      feesAtHead.set(chain.id, { head: head.value.number, fees: once });
      // A failed read is not kept: the next submission asks again.
      return yield* once.pipe(Effect.tapError(() => Effect.sync(() => feesAtHead.delete(chain.id))));
    });

  const find = (chainId: number, purpose: string) =>
    Effect.map(store.byPurpose(chainId, purpose), (row) => row && toRelayed(row));
  const findAction = (chainId: number, action: string) =>
    Effect.map(store.latestOfAction(chainId, action), (row) => row && toRelayed(row));

  /** The transaction that already answers a submission: its purpose, or a live attempt of its action. */
  const existing = (chainId: number, tx: RelayerSubmission) =>
    Effect.gen(function* () {
      const same = yield* find(chainId, tx.purpose);
      if (same || tx.action === undefined) return same;
      const latest = yield* findAction(chainId, tx.action);
      return latest && (latest.status === "pending" || latest.status === "mined") ? latest : undefined;
    });

  const refuseOverBudget = (chain: ResolvedChain, tx: RelayerSubmission, spent: bigint, cost: bigint) =>
    Effect.gen(function* () {
      const budget = relayerBudget(chain);
      yield* recordMetric((m) => m.relayerBudgetRefusals.inc({ chain_id: String(chain.id) }));
      yield* Effect.logWarning("relayer budget exhausted; transaction refused").pipe(
        Effect.annotateLogs({
          chain: chain.id,
          purpose: tx.purpose,
          spent_wei: spent.toString(),
          cost_wei: cost.toString(),
          budget_wei_per_hour: budget.toString(),
        }),
      );
      return yield* new RelayerError({
        reason: "budget_exhausted",
        message: `the relayer's hourly gas budget on chain ${chain.id} is spent`,
      });
    });

  const submit = (
    chainId: number,
    tx: RelayerSubmission,
  ): Effect.Effect<RelayedTransaction, RelayerError | SqlError.SqlError> =>
    Effect.gen(function* () {
      const from = account.from;
      if (account.address === undefined || from === undefined)
        return yield* new RelayerError({
          reason: "no_relayer_key",
          message: "RELAYER_PRIVATE_KEY is not set",
        });
      const address = account.address;
      const chain = registry.byId(chainId);
      if (!chain) return yield* new RelayerError({ reason: "unknown_chain", message: `no chain ${chainId}` });
      const answered = yield* existing(chainId, tx);
      if (answered) return answered;
      const client = clients.client(chain);
      const gas =
        tx.gasUsed ??
        (yield* Effect.tryPromise({
          // One execution's gas (eth_createAccessList) rather than eth_estimateGas's search, which ran
          // the call about six times: 1.8 s for a chargeMany of 200 on anvil against 0.3 s for one run.
          try: () =>
            client.createAccessList({ account: address, to: tx.to, data: tx.data }).then((r) => r.gasUsed),
          catch: (error) =>
            new RelayerError({
              reason: "simulation_failed",
              message: String(error).split("\n")[0] ?? "reverted",
            }),
        }));
      const fees = yield* currentFees(chain);
      const nodePending = yield* account.rpc("nonce", () =>
        client.getTransactionCount({ address, blockTag: "pending" }),
      );
      yield* ensureNonces(chainId, from);
      return yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* store.holdSubmission(chainId, from, tx.purpose, tx.action ?? null);
          const again = yield* existing(chainId, tx);
          if (again) return again;
          const gasLimit = gasLimitForUsed(gas);
          const cost = gasLimit * fees.maxFeePerGas;
          const spent = yield* store.spentSince(chainId, from, yield* since(HOUR_MS));
          if (!withinBudget(spent, cost, relayerBudget(chain)))
            return yield* refuseOverBudget(chain, tx, spent, cost);
          const nonce = yield* store.takeNonce(chainId, from, nodePending);
          const signed = yield* account.sign(chain, {
            to: tx.to,
            data: tx.data,
            nonce,
            gas: gasLimit,
            maxFeePerGas: fees.maxFeePerGas,
            maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
          });
          const row = yield* store.insert({
            chainId,
            from,
            nonce,
            to: tx.to,
            data: tx.data,
            gasLimit,
            maxFeePerGas: fees.maxFeePerGas,
            maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
            hash: signed.hash,
            raw: signed.raw,
            purpose: tx.purpose,
            action: tx.action ?? null,
          });
          // Inside a caller's transaction the bytes go out once it commits, never for a rollback.
          yield* sql.afterCommit(account.broadcast(chain, signed.raw));
          return toRelayed(row);
        }),
      );
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
          if (Option.isSome(receipt))
            return {
              hash,
              status: receipt.value.status === "success" ? ("mined" as const) : ("reverted" as const),
              blockNumber: Number(receipt.value.blockNumber),
            };
        }
        yield* Effect.sleep("100 millis");
      }
    }).pipe(Effect.timeoutOption(timeout), Effect.map(Option.getOrUndefined));

  return { address: account.address, submit, find, findAction, recentActions, waitMined };
});

export class Relayer extends Context.Service<Relayer>()("Relayer", { make }) {
  static readonly layer = Layer.effect(Relayer, make);
}
