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
 * - Authorisations go in groups: each chain's collector takes the authorisations submitted within a
 *   few milliseconds (or while earlier groups are on their way) and sends them as one `authorizeMany`
 *   (gas: the sum of the items' own measurements, or one run of the group), with a row per item (its
 *   purpose and action, as a lone transaction's) beside the row of the transaction that carries them.
 *   Each caller's own checks and writes run in the group's database transaction (a savepoint each: a
 *   refused item leaves the others), and each caller is answered once the bytes are broadcast. The
 *   escrow skips an item it refuses on chain; the tracker records that item as reverted.
 * - Fees: read once per chain head (the base fee changes only with a block), so submissions of one
 *   block share one read; the node's pending count is still read per submission (it is the only guard
 *   against another holder of the key, whose transaction a cached count would miss).
 */
import { Clock, Context, Deferred, Duration, Effect, Exit, Layer, Option, Queue, Semaphore } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import type { Hex } from "viem";
import { outsideTransaction } from "../db/client.ts";
import { Unavailable } from "../errors.ts";
import { newId } from "../ids.ts";
import { recordMetric } from "../metrics/metrics.ts";
import {
  type AuthorizationItem,
  authorizeManyData,
  skippedActions,
  takeGroup,
} from "./authorization-groups.ts";
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

/** One authorisation for the chain's next `authorizeMany` group. */
export interface GroupedAuthorization<E> {
  readonly item: AuthorizationItem;
  readonly purpose: string;
  readonly action: string;
  /** The item's own call (`authorize`/`authorizeWithPermit`), recorded on its row. */
  readonly data: Hex;
  /** Gas the caller's own run of that call used (`ChainClients.measureEscrow`), when it has one. */
  readonly gasUsed?: bigint;
  /**
   * The caller's checks and writes, run inside the group's database transaction before the item is
   * recorded (in a savepoint: a failure is the caller's answer and leaves the rest of the group), and
   * only when nothing answers the item already (its purpose, or a pending or mined attempt of its action).
   */
  readonly admit: Effect.Effect<void, E>;
}

/** An authorisation waiting in its chain's collector. */
interface Waiting
  extends Pick<GroupedAuthorization<unknown>, "item" | "purpose" | "action" | "data" | "gasUsed"> {
  /** Runs the caller's checks; false when they refused (the caller then has its answer already). */
  readonly admit: Effect.Effect<boolean>;
  readonly answer: (
    exit: Exit.Exit<RelayedTransaction, RelayerError | SqlError.SqlError>,
  ) => Effect.Effect<void>;
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

/**
 * Whether what `byPurposeOrAction` found answers a submission with `purpose`: the transaction with that
 * purpose, whatever its status, or a pending or mined attempt of the same action.
 */
const answering = (row: TransactionRow | undefined, purpose: string): RelayedTransaction | undefined =>
  row !== undefined && (row.purpose === purpose || row.status === "pending" || row.status === "mined")
    ? toRelayed(row)
    : undefined;

const HOUR_MS = 3_600_000;
/** How long a chain's collector gathers authorisations after the first one of a group arrives. */
const GROUP_WINDOW = Duration.millis(5);
/** How many groups of authorisations of one chain may be on their way at once. */
export const GROUPS_IN_FLIGHT = 4;
/**
 * Most authorisations in one group: ~130,000-210,000 gas each, so a group stays far below a block's gas
 * limit however many customers sign at once (the rest wait for the next group).
 */
export const GROUP_MAX = 50;

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

  /**
   * One execution's gas (eth_createAccessList) rather than eth_estimateGas's search, which ran the call
   * about six times: 1.8 s for a chargeMany of 200 on anvil against 0.3 s for one run.
   */
  const measure = (chain: ResolvedChain, address: Hex, to: Hex, data: Hex) =>
    Effect.tryPromise({
      try: () =>
        clients
          .client(chain)
          .createAccessList({ account: address, to, data })
          .then((r) => r.gasUsed),
      catch: (error) =>
        new RelayerError({
          reason: "simulation_failed",
          message: String(error).split("\n")[0] ?? "reverted",
        }),
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

  /** What every transaction sent needs read first, outside the database transaction that sends it. */
  const prepareSend = (chain: ResolvedChain, address: Hex, from: string) =>
    Effect.gen(function* () {
      const fees = yield* currentFees(chain);
      const nodePending = yield* account.rpc("nonce", () =>
        clients.client(chain).getTransactionCount({ address, blockTag: "pending" }),
      );
      yield* ensureNonces(chain.id, from);
      return { fees, nodePending };
    });

  /**
   * Inside the sending transaction: the hourly budget's check, the nonce, the signature and the row;
   * the bytes go out once the transaction commits, never for a rollback.
   */
  const signAndRecord = (
    chain: ResolvedChain,
    from: string,
    { fees, nodePending }: Effect.Success<ReturnType<typeof prepareSend>>,
    gas: bigint,
    tx: RelayerSubmission,
  ) =>
    Effect.gen(function* () {
      const gasLimit = gasLimitForUsed(gas);
      const cost = gasLimit * fees.maxFeePerGas;
      const spent = yield* store.spentSince(chain.id, from, yield* since(HOUR_MS));
      if (!withinBudget(spent, cost, relayerBudget(chain)))
        return yield* refuseOverBudget(chain, tx, spent, cost);
      const nonce = yield* store.takeNonce(chain.id, from, nodePending);
      const signed = yield* account.sign(chain, {
        to: tx.to,
        data: tx.data,
        nonce,
        gas: gasLimit,
        maxFeePerGas: fees.maxFeePerGas,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      });
      const row = yield* store.insert({
        chainId: chain.id,
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
      yield* sql.afterCommit(account.broadcast(chain, signed.raw));
      return row;
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
      const gas = tx.gasUsed ?? (yield* measure(chain, address, tx.to, tx.data));
      const sending = yield* prepareSend(chain, address, from);
      return yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* store.holdSubmission(chainId, from, tx.purpose, tx.action ?? null);
          const again = yield* existing(chainId, tx);
          if (again) return again;
          return toRelayed(yield* signAndRecord(chain, from, sending, gas, tx));
        }),
      );
    });

  /**
   * Sends a group: measures it once, then in one database transaction admits each item (its caller's
   * checks, or the attempt already live for its action), signs one `authorizeMany` of the admitted
   * items and records it with a row per item; broadcasts after the commit. Returns each admitted or
   * already answered item's row.
   */
  const sendGroupOnce = (chain: ResolvedChain, waiting: ReadonlyArray<Waiting>, address: Hex, from: string) =>
    Effect.gen(function* () {
      const to = chain.escrow.address;
      // In one order (by action, which names the mandate) in every group: two groups never take the
      // same mandates' row locks in opposite orders.
      const ordered = [...waiting].sort((a, b) => (a.action < b.action ? -1 : a.action > b.action ? 1 : 0));
      // Each item's own call was measured by its caller (an authorize alone costs more than an item of
      // authorizeMany, which shares the transaction's base cost); otherwise the group is measured once.
      // Items dropped below only make the call cheaper.
      const gas = ordered.every((w) => w.gasUsed !== undefined)
        ? ordered.reduce((sum, w) => sum + (w.gasUsed ?? 0n), 0n)
        : yield* measure(chain, address, to, authorizeManyData(ordered.map((w) => w.item)));
      const sending = yield* prepareSend(chain, address, from);
      return yield* sql.withTransaction(
        Effect.gen(function* () {
          yield* store.holdItems(
            chain.id,
            from,
            ordered.map((w) => ({ purpose: w.purpose, action: w.action })),
          );
          const answers: Array<readonly [Waiting, RelayedTransaction]> = [];
          const admitted = new Map<string, Waiting>();
          const sameAction: Waiting[] = [];
          // What `existing` reads for one submission, read for the whole group in one statement.
          const found = yield* store.byPurposeOrAction(chain.id, ordered);
          for (const [n, w] of ordered.entries()) {
            if (admitted.has(w.action)) {
              sameAction.push(w);
              continue;
            }
            const answered = answering(found.get(n), w.purpose);
            if (answered) answers.push([w, answered]);
            else if (yield* w.admit) admitted.set(w.action, w);
          }
          if (admitted.size === 0) return answers;
          const items = [...admitted.values()];
          const data = authorizeManyData(items.map((w) => w.item));
          const purpose = `authorizeMany:${chain.id}:${yield* newId("request")}`;
          const carrier = yield* signAndRecord(chain, from, sending, gas, { to, data, purpose });
          const rows = yield* store.insertItems(
            carrier,
            items.map((w) => ({ purpose: w.purpose, action: w.action, data: w.data })),
          );
          const byAction = new Map(rows.map((row) => [row.action, toRelayed(row)]));
          for (const w of [...items, ...sameAction]) {
            const row = byAction.get(w.action);
            if (row) answers.push([w, row]);
          }
          return answers;
        }),
      );
    });

  /** Sends a group and answers every caller in it: its item's row, or the group's failure. */
  const sendGroup = (chain: ResolvedChain, waiting: ReadonlyArray<Waiting>) =>
    Effect.gen(function* () {
      const { address, from } = account;
      const sent = yield* Effect.exit(
        address === undefined || from === undefined
          ? Effect.fail(
              new RelayerError({ reason: "no_relayer_key", message: "RELAYER_PRIVATE_KEY is not set" }),
            )
          : sendGroupOnce(chain, waiting, address, from),
      );
      if (Exit.isSuccess(sent)) for (const [w, row] of sent.value) yield* w.answer(Exit.succeed(row));
      // Every caller not answered above (a failed group answers all; an answer is given once only).
      const failed = Exit.isFailure(sent)
        ? Exit.failCause(sent.cause)
        : Exit.fail(
            new RelayerError({ reason: "simulation_failed", message: "the group left this item out" }),
          );
      for (const w of waiting) yield* w.answer(failed);
    });

  // One collector per chain: once an authorisation waits, it gathers those submitted in the next few
  // milliseconds and sends them as a group. At most GROUPS_IN_FLIGHT groups of a chain are on their way
  // at once (each a database transaction and a nonce of its own); while they all are, what is submitted
  // waits and forms the next group.
  const collectors = new Map<number, Queue.Queue<Waiting>>();
  /** `billing_relayer_authorizations_waiting`: what a chain's collector holds now (set, so it never drifts). */
  const countWaiting = (chainId: number, queue: Queue.Queue<Waiting>) =>
    recordMetric((m) => m.authorizationsWaiting.set({ chain_id: String(chainId) }, Queue.sizeUnsafe(queue)));
  for (const chain of registry.all) {
    const queue = yield* Queue.unbounded<Waiting>();
    collectors.set(chain.id, queue);
    const inFlight = yield* Semaphore.make(GROUPS_IN_FLIGHT);
    const group = Effect.gen(function* () {
      yield* Semaphore.take(inFlight, 1);
      const waiting = yield* takeGroup(queue, GROUP_MAX, GROUP_WINDOW);
      yield* countWaiting(chain.id, queue);
      yield* Effect.forkScoped(
        sendGroup(chain, waiting).pipe(Effect.ensuring(Semaphore.release(inFlight, 1))),
      );
    });
    yield* Effect.forkScoped(Effect.forever(group));
  }

  /** Submits an authorisation in its chain's next `authorizeMany` group; answers after the broadcast. */
  const submitAuthorization = <E>(
    chainId: number,
    grouped: GroupedAuthorization<E>,
  ): Effect.Effect<RelayedTransaction, E | RelayerError | SqlError.SqlError> =>
    Effect.gen(function* () {
      if (account.address === undefined)
        return yield* new RelayerError({
          reason: "no_relayer_key",
          message: "RELAYER_PRIVATE_KEY is not set",
        });
      const queue = collectors.get(chainId);
      if (queue === undefined)
        return yield* new RelayerError({ reason: "unknown_chain", message: `no chain ${chainId}` });
      const done = yield* Deferred.make<RelayedTransaction, E | RelayerError | SqlError.SqlError>();
      yield* Queue.offer(queue, {
        item: grouped.item,
        purpose: grouped.purpose,
        action: grouped.action,
        data: grouped.data,
        gasUsed: grouped.gasUsed,
        admit: sql.withTransaction(grouped.admit).pipe(
          Effect.as(true),
          Effect.catchCause((cause) => Effect.as(Deferred.failCause(done, cause), false)),
        ),
        answer: (exit) => Effect.asVoid(Deferred.done(done, exit)),
      });
      yield* countWaiting(chainId, queue);
      return yield* Deferred.await(done);
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
    address: account.address,
    submit,
    submitAuthorization,
    find,
    findAction,
    recentActions,
    waitMined,
  };
});

export class Relayer extends Context.Service<Relayer>()("Relayer", { make }) {
  static readonly layer = Layer.effect(Relayer, make);
}
