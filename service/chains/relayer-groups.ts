/**
 * Authorisations go in groups: each chain's collector takes the authorisations submitted within a few
 * milliseconds (or while earlier groups are on their way) and sends them as one `authorizeMany` (gas:
 * the sum of the items' own measurements, or one run of the group), with a row per item (its purpose and
 * action, as a lone transaction's) beside the row of the transaction that carries them. Each caller's
 * own checks and writes run in the group's database transaction (a savepoint each: a refused item
 * leaves the others), and each caller is answered once the bytes are broadcast. The escrow skips an
 * item it refuses on chain; the tracker records that item as reverted. An item whose merchant's share
 * of the relayer's budget has no room for its part is refused alone (relayer-shares.ts). Each item's row
 * names the carrier's (`carrier_id`); only carriers are tracked and count against the budget.
 */
import { Clock, Deferred, Duration, Effect, Exit, Option, Queue, Semaphore } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import type { Hex } from "viem";
import { newId } from "../ids.ts";
import { recordMetric } from "../metrics/metrics.ts";
import { type AuthorizationItem, authorizeManyData, takeGroup } from "./authorization-groups.ts";
import type { ResolvedChain } from "./config.ts";
import { gasLimitForUsed } from "./gas-measure.ts";
import { ChainRegistry } from "./registry.ts";
import { RelayerAccount, RelayerError } from "./relayer-account.ts";
import { budgetWindowStart } from "./relayer-budget.ts";
import { merchantShareLimit, partOf, shareRefusal, shareRetryAfterSeconds } from "./relayer-shares.ts";
import { RelayerStore } from "./relayer-store.ts";
import {
  answering,
  type makeSubmissionSteps,
  noRelayerKey,
  type RelayedTransaction,
  toRelayed,
} from "./relayer-submission.ts";

/** One authorisation for the chain's next `authorizeMany` group. */
export interface GroupedAuthorization<E> {
  readonly item: AuthorizationItem;
  readonly purpose: string;
  readonly action: string;
  /** The item's own call (`authorize`/`authorizeWithPermit`), recorded on its row. */
  readonly data: Hex;
  /** Gas the caller's own run of that call used (`ChainClients.measureEscrow`), when it has one. */
  readonly gasUsed?: bigint;
  /** The mandate's merchant, whose share of the relayer's budget the item's part counts against. */
  readonly merchant: string;
  /**
   * The caller's checks and writes, run inside the group's database transaction before the item is
   * recorded (in a savepoint: a failure is the caller's answer and leaves the rest of the group), and
   * only when nothing answers the item already (its purpose, or a pending or mined attempt of its action).
   */
  readonly admit: Effect.Effect<void, E>;
}

/** An authorisation waiting in its chain's collector. */
interface Waiting
  extends Pick<
    GroupedAuthorization<unknown>,
    "item" | "purpose" | "action" | "data" | "gasUsed" | "merchant"
  > {
  /** Runs the caller's checks; false when they refused (the caller then has its answer already). */
  readonly admit: Effect.Effect<boolean>;
  /** Whether the caller has its answer. */
  readonly answered: Effect.Effect<boolean>;
  readonly answer: (
    exit: Exit.Exit<RelayedTransaction, RelayerError | SqlError.SqlError>,
  ) => Effect.Effect<void>;
}

/** How long a chain's collector gathers authorisations after the first one of a group arrives. */
const GROUP_WINDOW = Duration.millis(5);
/** How many groups of authorisations of one chain may be on their way at once. */
export const GROUPS_IN_FLIGHT = 4;
/**
 * Most authorisations in one group: ~130,000-210,000 gas each, so a group stays far below a block's gas
 * limit however many customers sign at once (the rest wait for the next group).
 */
export const GROUP_MAX = 50;

export const makeAuthorizationGroups = (steps: Effect.Success<typeof makeSubmissionSteps>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const registry = yield* ChainRegistry;
    const account = yield* RelayerAccount;
    const store = yield* RelayerStore;

    /**
     * The room left in the shares of a group's merchants (relayer-shares.ts), taken item by item: an item
     * whose part does not fit is answered with the refusal; the rest of the group goes on. The recorded
     * parts are checked once more when the carrier is signed (with fewer items admitted, each part is
     * larger); a refusal there sends the group again without the merchants it names (`sendGroup`).
     */
    const merchantRoom = (chain: ResolvedChain, from: string, waiting: ReadonlyArray<Waiting>) =>
      Effect.gen(function* () {
        const limit = merchantShareLimit(chain);
        const merchants = [...new Set(waiting.map((w) => w.merchant))];
        const minutes = yield* store.merchantSpentSince(chain.id, from, merchants, yield* budgetWindowStart);
        const spent = new Map<string, bigint>();
        for (const row of minutes) spent.set(row.merchant_id, (spent.get(row.merchant_id) ?? 0n) + row.wei);
        const take = (w: Waiting, part: bigint, purpose: string) =>
          Effect.gen(function* () {
            const after = (spent.get(w.merchant) ?? 0n) + part;
            if (after <= limit) {
              spent.set(w.merchant, after);
              return true;
            }
            // What the merchant's earlier items in this group take comes on top of this item's part.
            const ofMerchant = minutes.filter((row) => row.merchant_id === w.merchant);
            const recorded = ofMerchant.reduce((sum, row) => sum + row.wei, 0n);
            const retryAfterSeconds = shareRetryAfterSeconds(
              ofMerchant,
              after - recorded,
              limit,
              yield* Clock.currentTimeMillis,
            );
            const refusal = yield* shareRefusal(
              chain,
              [{ merchantId: w.merchant, retryAfterSeconds }],
              part,
              purpose,
            );
            yield* w.answer(Exit.fail(refusal));
            return false;
          });
        return { take };
      });

    /**
     * Sends a group: measures it once, then in one database transaction admits each item (its caller's
     * checks, or the attempt already live for its action), signs one `authorizeMany` of the admitted
     * items and records it with a row per item; broadcasts after the commit. Returns each admitted or
     * already answered item's row.
     */
    const sendGroupOnce = (
      chain: ResolvedChain,
      waiting: ReadonlyArray<Waiting>,
      address: Hex,
      from: string,
    ) =>
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
          : yield* steps.measure(chain, address, to, authorizeManyData(ordered.map((w) => w.item)));
        const purpose = `authorizeMany:${chain.id}:${yield* newId("request")}`;
        const prepared = yield* steps.prepare(chain, address, from, purpose);
        // Each item's part of the group's most possible cost, were every item admitted.
        const itemPart = partOf(gasLimitForUsed(gas) * prepared.fees.maxFeePerGas, 1, ordered.length);
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
            const shares = yield* merchantRoom(chain, from, ordered);
            for (const [n, w] of ordered.entries()) {
              if (admitted.has(w.action)) {
                sameAction.push(w);
                continue;
              }
              const answered = answering(found.get(n), w.purpose);
              if (answered) answers.push([w, answered]);
              // An item whose merchant's share has no room for it is refused alone, before its checks.
              else if (!(yield* shares.take(w, itemPart, purpose))) continue;
              else if (yield* w.admit) admitted.set(w.action, w);
            }
            if (admitted.size === 0) return answers;
            const items = [...admitted.values()];
            const data = authorizeManyData(items.map((w) => w.item));
            const carrier = yield* steps.signAndRecord(chain, from, prepared, gas, {
              to,
              data,
              purpose,
              merchants: items.map((w) => w.merchant),
            });
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
        const address = account.address(chain.id);
        const from = account.from(chain.id);
        const attempt = (items: ReadonlyArray<Waiting>) =>
          Effect.exit(
            address === undefined || from === undefined
              ? Effect.fail(noRelayerKey())
              : sendGroupOnce(chain, items, address, from),
          );
        let items = waiting;
        let sent = yield* attempt(items);
        // Refused when signed for merchants whose parts grew as fewer items were admitted: their items are
        // answered with the refusal and the rest sent again (nothing of the refused attempt was kept).
        while (Exit.isFailure(sent)) {
          const error = Option.getOrUndefined(Exit.findErrorOption(sent));
          if (error?._tag !== "RelayerError" || error.reason !== "merchant_share_exhausted") break;
          const out = new Set(error.merchants ?? []);
          const rest: Waiting[] = [];
          for (const w of items)
            if (out.has(w.merchant)) yield* w.answer(Exit.fail(error));
            else if (!(yield* w.answered)) rest.push(w);
          if (rest.length === 0 || rest.length === items.length) break;
          items = rest;
          sent = yield* attempt(items);
        }
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
    // milliseconds and sends them as a group. At most GROUPS_IN_FLIGHT groups of a chain are on their
    // way at once (each a database transaction and a nonce of its own); while they all are, what is
    // submitted waits and forms the next group.
    const collectors = new Map<number, Queue.Queue<Waiting>>();
    /** `billing_relayer_authorizations_waiting`: what a chain's collector holds now (set, so it never drifts). */
    const countWaiting = (chainId: number, queue: Queue.Queue<Waiting>) =>
      recordMetric((m) =>
        m.authorizationsWaiting.set({ chain_id: String(chainId) }, Queue.sizeUnsafe(queue)),
      );
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
        if (account.address(chainId) === undefined) return yield* noRelayerKey();
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
          merchant: grouped.merchant,
          admit: sql.withTransaction(grouped.admit).pipe(
            Effect.as(true),
            Effect.catchCause((cause) => Effect.as(Deferred.failCause(done, cause), false)),
          ),
          answer: (exit) => Effect.asVoid(Deferred.done(done, exit)),
          answered: Deferred.isDone(done),
        });
        yield* countWaiting(chainId, queue);
        return yield* Deferred.await(done);
      });

    return { submitAuthorization };
  });
