/**
 * The one writer of `billing.payments`, `billing.payment_facts`, `billing.payment_transfers` and
 * `billing.deposit_watch`: a payment created, its status and amounts moved by the state machine
 * (payment-transitions.ts), the chain facts applied to it, the payers' transfers the deposit watcher
 * saw, its sweeps, releases and returns under way.
 */
import { randomBytes } from "node:crypto";
import { Array as Arr, Context, Effect, Layer, Schema } from "effect";
import { SqlClient } from "effect/sql";
import { getAddress, type Hex } from "viem";
import type { PaymentMachine } from "../../src/ledger/payment-machine.ts";
import { TRANSFER_FAILURE_CODES, type TransferFailure } from "../chains/blocked-transfers.ts";
import { type Fragment, lockRows, type PageRequest, pageRows, relation, selectRows } from "../db/query.ts";
import { decodeRows, firstOr, theRow } from "../db/rows.ts";
import { resourceMissing } from "../errors.ts";
import { newId } from "../ids.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { PAYMENT_COLUMNS, PaymentRow, TransferRow } from "./payment-object.ts";

/** Notified when deposit addresses become due a sweep: wakes the sweeper. */
export const DEPOSITS_CHANNEL = "billing_deposits";

export const PAYMENTS = relation({
  from: "billing.payments p",
  alias: "p",
  columns: PAYMENT_COLUMNS,
  row: PaymentRow,
});

export interface NewPayment {
  readonly scope: MerchantScope;
  readonly chainId: number;
  readonly token: Hex;
  readonly payee: Hex;
  readonly operator: Hex;
  readonly holdSeconds: number;
  readonly onchainId: Hex;
  readonly depositAddress: Hex;
  readonly amount: bigint;
  readonly reference: string | null;
  readonly description: string | null;
  readonly expiresAt: number;
  readonly watchUntil: number;
  readonly createdBlock: bigint;
}

export interface PaymentFilters {
  readonly status?: PaymentRow["status"];
  readonly reference?: string;
}

/** A confirmed chain fact about a payment (a sweep, a release, a return). */
export interface PaymentFactRecord {
  readonly chainId: number;
  readonly key: string;
  readonly kind: "received" | "released" | "returned";
  readonly amount: string;
  readonly blockNumber: string;
  readonly blockHash: string;
  readonly txHash: string;
  readonly logIndex: number;
  readonly timestamp: string;
}

export interface ObservedTransfer {
  readonly chainId: number;
  readonly paymentId: string;
  readonly txHash: string;
  readonly logIndex: number;
  readonly from: string;
  readonly amount: bigint;
  readonly blockNumber: bigint;
  readonly blockHash: string;
  readonly timestamp: number;
}

/** A new, unguessable pay page link token. */
const pageToken = () => randomBytes(24).toString("base64url");

const StandingFact = Schema.Struct({
  payment_id: Schema.String,
  fact_key: Schema.String,
  kind: Schema.Literals(["received", "released", "returned"]),
  amount: Schema.String,
  block_number: Schema.String,
});
export type StandingFact = typeof StandingFact.Type;
const decodeStanding = decodeRows(StandingFact);
const decodeTransfers = decodeRows(TransferRow);
const decodeFactState = decodeRows(Schema.Struct({ standing: Schema.Boolean }));
const decodeKeys = decodeRows(Schema.Struct({ key: Schema.String }));
const decodeScanned = decodeRows(Schema.Struct({ scanned_block: Schema.String }));
const WatchedDeposit = Schema.Struct({ id: Schema.String, address: Schema.String, token: Schema.String });
export type WatchedDeposit = typeof WatchedDeposit.Type;
const decodeWatched = decodeRows(WatchedDeposit);
const decodeIds = decodeRows(Schema.Struct({ id: Schema.String }));
const decodeSums = decodeRows(Schema.Struct({ payment_id: Schema.String, total: Schema.String }));
const decodeHeldBack = decodeRows(
  Schema.Struct({
    id: Schema.String,
    code: Schema.Literals(TRANSFER_FAILURE_CODES),
    payee_address: Schema.String,
    deposit_address: Schema.String,
    token_address: Schema.String,
  }),
);

/** A new payment's columns; the others start as the table's defaults say. */
const newRow = (id: string, payment: NewPayment) => ({
  id,
  merchant_id: payment.scope.merchantId,
  livemode: payment.scope.livemode,
  chain_id: payment.chainId,
  token_address: getAddress(payment.token),
  payee_address: getAddress(payment.payee),
  operator_address: getAddress(payment.operator),
  hold_seconds: payment.holdSeconds,
  onchain_id: payment.onchainId,
  deposit_address: payment.depositAddress.toLowerCase(),
  page_token: pageToken(),
  amount: payment.amount.toString(),
  status: "requires_payment",
  reference: payment.reference,
  description: payment.description,
  expires_at: payment.expiresAt,
  watch_until: payment.watchUntil,
  created_block: payment.createdBlock.toString(),
});

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const inScope = (scope: MerchantScope): Fragment[] => [
    sql`p.merchant_id = ${scope.merchantId}`,
    sql`p.livemode = ${scope.livemode}`,
  ];
  const select = (where: ReadonlyArray<Fragment>, options?: Parameters<typeof selectRows>[3]) =>
    selectRows(sql, PAYMENTS, where, options);
  const reload = (id: string) => select([sql`p.id = ${id}`]).pipe(Effect.flatMap(theRow(`payment ${id}`)));
  const idsOf = (rows: ReadonlyArray<unknown>) => Effect.map(decodeIds(rows), (r) => r.map((row) => row.id));

  return {
    insert: (payment: NewPayment) =>
      Effect.gen(function* () {
        const id = yield* newId("payment");
        yield* sql`INSERT INTO billing.payments ${sql.insert(newRow(id, payment))}`;
        return yield* reload(id);
      }),
    /**
     * A payment at a deposit address whose id the payer's side chose (an x402 `payTo` made per request):
     * made once. The same address again finds the payment made first, if it is this merchant's.
     */
    insertAtDeposit: (payment: NewPayment) =>
      Effect.gen(function* () {
        const id = yield* newId("payment");
        yield* sql`INSERT INTO billing.payments ${sql.insert(newRow(id, payment))}
          ON CONFLICT (chain_id, deposit_address) DO NOTHING`;
        const rows = yield* select([
          sql`p.chain_id = ${payment.chainId}`,
          sql`p.deposit_address = ${payment.depositAddress.toLowerCase()}`,
          ...inScope(payment.scope),
        ]);
        return rows[0];
      }),

    /** The merchant's payment, or 404; locked for update when asked (inside a transaction). */
    load: (scope: MerchantScope, id: string, options: { readonly lock?: boolean } = {}) =>
      select([sql`p.id = ${id}`, ...inScope(scope)], options.lock ? { lock: "update" } : {}).pipe(
        Effect.flatMap(firstOr(() => resourceMissing("payment", id))),
      ),
    reload,
    lock: (id: string) =>
      select([sql`p.id = ${id}`], { lock: "update" }).pipe(Effect.flatMap(theRow(`payment ${id}`))),
    byPageToken: (token: string) =>
      select([sql`p.page_token = ${token}`]).pipe(Effect.map((rows) => rows[0])),
    /** The merchant's payment with this deposit address on the chain, if any (an x402 `payTo`). */
    byDeposit: (scope: MerchantScope, chainId: number, depositAddress: string) =>
      select([
        sql`p.chain_id = ${chainId}`,
        sql`p.deposit_address = ${depositAddress.toLowerCase()}`,
        ...inScope(scope),
      ]).pipe(Effect.map((rows) => rows[0])),
    /** The chain's payments with these deposit addresses, locked in id order: what chain facts apply to. */
    lockByDeposits: (chainId: number, depositAddresses: ReadonlyArray<string>) =>
      depositAddresses.length === 0
        ? Effect.succeed([] as ReadonlyArray<PaymentRow>)
        : select(
            [
              sql`p.chain_id = ${chainId}`,
              sql`p.deposit_address = ANY (${depositAddresses.map((a) => a.toLowerCase())}::text[])`,
            ],
            { order: sql`p.id`, lock: "update" },
          ),
    /** The payments named, as they stand (unlocked). */
    reloadMany: (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.succeed([] as ReadonlyArray<PaymentRow>)
        : select([sql`p.id = ANY (${ids}::text[])`]),
    page: (scope: MerchantScope, filters: PaymentFilters, page: PageRequest) =>
      pageRows(
        sql,
        PAYMENTS,
        [
          ...inScope(scope),
          ...(filters.status !== undefined ? [sql`p.status = ${filters.status}`] : []),
          ...(filters.reference !== undefined ? [sql`p.reference = ${filters.reference}`] : []),
        ],
        page,
      ),
    /** The transfers each payment received, oldest first. */
    transfersOf: (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.succeed([] as ReadonlyArray<TransferRow>)
        : sql`SELECT payment_id, tx_hash, log_index, from_address, amount::text AS amount,
              block_number::float8 AS block_number, timestamp::float8 AS timestamp
            FROM billing.payment_transfers WHERE payment_id = ANY (${ids}::text[])
            ORDER BY block_number, log_index`.pipe(Effect.flatMap(decodeTransfers)),

    /** Each payment's machine in its new state, and its event count moved on where the step raised one. */
    saveMachines: (
      saved: ReadonlyArray<{
        readonly id: string;
        readonly state: PaymentMachine;
        readonly raised: boolean;
        readonly now: number;
      }>,
    ) => {
      if (saved.length === 0) return Effect.void;
      const rows = saved.map(({ id, state, raised, now }) => ({
        id,
        status: state.status,
        received: state.received.toString(),
        seen: state.seen.toString(),
        closed: state.closed,
        raised: raised ? 1 : 0,
        now,
      }));
      return Effect.asVoid(sql`UPDATE billing.payments p SET status = v.status, received = v.received,
          seen = v.seen, closed = v.closed, transitions = p.transitions + v.raised,
          paid_at = CASE WHEN v.status = 'paid' AND p.status <> 'paid' THEN v.now ELSE p.paid_at END,
          canceled_at = CASE WHEN v.status = 'canceled' AND p.status <> 'canceled' THEN v.now
            ELSE p.canceled_at END,
          updated_at = now()
        FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS v(id text, status text, received numeric,
          seen numeric, closed boolean, raised int, now bigint)
        WHERE p.id = ANY (${rows.map((r) => r.id)}::text[]) AND p.id = v.id`);
    },

    /** Records confirmed chain facts applied to payments, or marks them standing again after a reorg. */
    recordFacts: (facts: ReadonlyArray<{ readonly paymentId: string; readonly fact: PaymentFactRecord }>) => {
      const rows = facts.map(
        ({ paymentId, fact }): Record<string, unknown> => ({
          chain_id: fact.chainId,
          fact_key: fact.key,
          payment_id: paymentId,
          kind: fact.kind,
          amount: fact.amount,
          block_number: fact.blockNumber,
          block_hash: fact.blockHash,
          tx_hash: fact.txHash,
          log_index: fact.logIndex,
          timestamp: fact.timestamp,
        }),
      );
      return Arr.isReadonlyArrayNonEmpty(rows)
        ? Effect.asVoid(sql`INSERT INTO billing.payment_facts ${sql.insert(rows)}
            ON CONFLICT (chain_id, fact_key) DO UPDATE SET standing = true, block_number = EXCLUDED.block_number,
              block_hash = EXCLUDED.block_hash, tx_hash = EXCLUDED.tx_hash, log_index = EXCLUDED.log_index,
              timestamp = EXCLUDED.timestamp`)
        : Effect.void;
    },
    /** Whether the fact was applied and still stands (read under the payment's lock, before `recordFacts`). */
    factStands: (chainId: number, key: string) =>
      Effect.map(
        sql`SELECT standing FROM billing.payment_facts
          WHERE chain_id = ${chainId} AND fact_key = ${key}`.pipe(Effect.flatMap(decodeFactState)),
        (rows) => rows[0]?.standing === true,
      ),
    /**
     * How many returns of the payment's funds were ever applied (a return a reorg took out still counts:
     * its record stays). Read under the payment's lock, it names the hold a new return is for.
     */
    returnsRecorded: (paymentId: string) =>
      Effect.map(
        sql`SELECT count(*)::int AS n FROM billing.payment_facts
          WHERE payment_id = ${paymentId} AND kind = 'returned'`.pipe(
          Effect.flatMap(decodeRows(Schema.Struct({ n: Schema.Number }))),
        ),
        (rows) => rows[0]?.n ?? 0,
      ),
    /** Standing facts of a chain in blocks (from, through]: what a reorg may have taken out. */
    /** Which of these fact keys stand applied to a payment. */
    standingKeys: (chainId: number, keys: ReadonlyArray<string>) =>
      keys.length === 0
        ? Effect.succeed(new Set<string>())
        : sql`SELECT fact_key AS key FROM billing.payment_facts
            WHERE chain_id = ${chainId} AND fact_key = ANY (${keys}::text[]) AND standing`.pipe(
            Effect.flatMap(decodeKeys),
            Effect.map((rows) => new Set(rows.map((row) => row.key))),
          ),
    standingFacts: (chainId: number, fromBlock: bigint, throughBlock: bigint) =>
      sql`SELECT payment_id, fact_key, kind, amount::text AS amount, block_number::text AS block_number
        FROM billing.payment_facts
        WHERE chain_id = ${chainId} AND standing AND block_number > ${fromBlock.toString()}
          AND block_number <= ${throughBlock.toString()}
        ORDER BY block_number, log_index`.pipe(Effect.flatMap(decodeStanding)),
    markFactGone: (chainId: number, key: string) =>
      Effect.asVoid(sql`UPDATE billing.payment_facts SET standing = false
        WHERE chain_id = ${chainId} AND fact_key = ${key}`),
    /** Each payment's funds under hold, as the confirmed facts leave them. */
    recordHolds: (
      holds: ReadonlyArray<{ readonly id: string; readonly held: string; readonly releaseAt: number | null }>,
    ) =>
      holds.length === 0
        ? Effect.void
        : Effect.asVoid(sql`UPDATE billing.payments p SET held = v.held, release_at = v.release_at,
          pending_action = CASE WHEN v.held = 0 THEN NULL ELSE p.pending_action END,
          pending_action_purpose = CASE WHEN v.held = 0 THEN NULL ELSE p.pending_action_purpose END,
          updated_at = now()
        FROM jsonb_to_recordset(${JSON.stringify(
          holds.map((h) => ({ id: h.id, held: h.held, release_at: h.releaseAt })),
        )}::jsonb) AS v(id text, held numeric, release_at bigint)
        WHERE p.id = ANY (${holds.map((h) => h.id)}::text[]) AND p.id = v.id`),

    /**
     * The tokens of the chain's payments watched at `now` (chain time): one index probe per token ever
     * taken on the chain (its latest `watch_until`), not a read of its payments.
     */
    watchedTokens: (chainId: number, now: number) =>
      sql`WITH RECURSIVE tokens AS (
            (SELECT token_address, watch_until FROM billing.payments WHERE chain_id = ${chainId}
              ORDER BY token_address, watch_until DESC LIMIT 1)
            UNION ALL
            SELECT later.token_address, later.watch_until FROM tokens t CROSS JOIN LATERAL (
              SELECT p.token_address, p.watch_until FROM billing.payments p
              WHERE p.chain_id = ${chainId} AND p.token_address > t.token_address
              ORDER BY p.token_address, p.watch_until DESC LIMIT 1) later
          )
          SELECT token_address AS token FROM tokens WHERE watch_until >= ${now}`.pipe(
        Effect.flatMap(decodeRows(Schema.Struct({ token: Schema.String }))),
        Effect.map((rows) => rows.map((row) => row.token)),
      ),
    /**
     * The deposit addresses of the chain's payments watched at `now` when there are at most `max` (an
     * index range read that stops after `max + 1`); undefined when there are more.
     */
    watchedAddressesUpTo: (chainId: number, now: number, max: number) =>
      sql`SELECT deposit_address AS address FROM billing.payments
          WHERE chain_id = ${chainId} AND watch_until >= ${now} LIMIT ${max + 1}`.pipe(
        Effect.flatMap(decodeRows(Schema.Struct({ address: Schema.String }))),
        Effect.map((rows) => (rows.length > max ? undefined : rows.map((row) => row.address as Hex))),
      ),
    /** Of these addresses (lowercase), the deposit addresses of the chain's payments watched at `now`. */
    watchedAt: (chainId: number, addresses: ReadonlyArray<string>, now: number) =>
      addresses.length === 0
        ? Effect.succeed([] as ReadonlyArray<WatchedDeposit>)
        : sql`SELECT id, deposit_address AS address, token_address AS token FROM billing.payments
            WHERE chain_id = ${chainId} AND deposit_address = ANY (${addresses}::text[])
              AND watch_until >= ${now}`.pipe(Effect.flatMap(decodeWatched)),
    /**
     * The block the oldest of the chain's payments watched at `now` was created in: where a watcher
     * without a cursor (or far behind) starts. Reads every watched payment: not for every pass.
     */
    oldestWatchedBlock: (chainId: number, now: number) =>
      Effect.map(
        sql`SELECT min(created_block)::text AS block FROM billing.payments
          WHERE chain_id = ${chainId} AND watch_until >= ${now}`.pipe(
          Effect.flatMap(decodeRows(Schema.Struct({ block: Schema.NullOr(Schema.String) }))),
        ),
        (rows) => {
          const block = rows[0]?.block;
          return block === undefined || block === null ? undefined : BigInt(block);
        },
      ),
    /**
     * Whether the chain may have payments to watch: a cheap gate before asking the chain for its head
     * (by the database's clock, a day early: chain time in test mode only runs ahead of it).
     */
    mayWatch: (chainId: number) =>
      Effect.map(
        sql`SELECT EXISTS (SELECT 1 FROM billing.payments WHERE chain_id = ${chainId}
            AND watch_until >= extract(epoch FROM now()) - 86400) AS any`.pipe(
          Effect.flatMap(decodeRows(Schema.Struct({ any: Schema.Boolean }))),
        ),
        (rows) => rows[0]?.any === true,
      ),
    scannedBlock: (chainId: number) =>
      Effect.map(
        sql`SELECT scanned_block::text AS scanned_block FROM billing.deposit_watch
          WHERE chain_id = ${chainId}`.pipe(Effect.flatMap(decodeScanned)),
        (rows) => (rows[0] === undefined ? undefined : BigInt(rows[0].scanned_block)),
      ),
    saveScannedBlock: (chainId: number, block: bigint) =>
      Effect.asVoid(sql`INSERT INTO billing.deposit_watch (chain_id, scanned_block)
        VALUES (${chainId}, ${block.toString()})
        ON CONFLICT (chain_id) DO UPDATE SET scanned_block = EXCLUDED.scanned_block, updated_at = now()`),
    /** The chain has nothing to watch: the next payment is read from the block it was created in. */
    forgetScannedBlock: (chainId: number) =>
      Effect.asVoid(sql`DELETE FROM billing.deposit_watch WHERE chain_id = ${chainId}`),
    /**
     * The transfers read from blocks (from, through] replace what was recorded there for the payments
     * watched at `now` (a reorg may have dropped some); returns the payments whose transfers changed.
     */
    replaceTransfers: (
      chainId: number,
      now: number,
      fromBlock: bigint,
      throughBlock: bigint,
      transfers: ReadonlyArray<ObservedTransfer>,
    ) =>
      Effect.gen(function* () {
        const keep = transfers.map((t) => `${t.txHash}:${t.logIndex}`);
        const dropped = yield* sql`DELETE FROM billing.payment_transfers t USING billing.payments p
          WHERE t.chain_id = ${chainId} AND t.block_number > ${fromBlock.toString()}
            AND t.block_number <= ${throughBlock.toString()} AND p.id = t.payment_id AND p.watch_until >= ${now}
            AND NOT (t.tx_hash || ':' || t.log_index = ANY (${keep}::text[]))
          RETURNING t.payment_id AS id`.pipe(Effect.flatMap(idsOf));
        const added = !Arr.isReadonlyArrayNonEmpty(transfers)
          ? []
          : yield* sql`INSERT INTO billing.payment_transfers ${sql.insert(
              Arr.map(transfers, (t) => ({
                chain_id: t.chainId,
                tx_hash: t.txHash,
                log_index: t.logIndex,
                payment_id: t.paymentId,
                from_address: t.from.toLowerCase(),
                amount: t.amount.toString(),
                block_number: t.blockNumber.toString(),
                block_hash: t.blockHash,
                timestamp: t.timestamp,
              })),
            )}
              ON CONFLICT (chain_id, tx_hash, log_index) DO UPDATE SET block_number = EXCLUDED.block_number,
                block_hash = EXCLUDED.block_hash, timestamp = EXCLUDED.timestamp
                WHERE billing.payment_transfers.block_hash <> EXCLUDED.block_hash
              RETURNING payment_id AS id`.pipe(Effect.flatMap(idsOf));
        return [...new Set([...dropped, ...added])];
      }),
    /** Everything the watcher saw arrive at each payment's deposit address. */
    transferTotals: (ids: ReadonlyArray<string>) =>
      Effect.map(
        sql`SELECT payment_id, sum(amount)::text AS total FROM billing.payment_transfers
          WHERE payment_id = ANY (${ids}::text[]) GROUP BY payment_id`.pipe(Effect.flatMap(decodeSums)),
        (rows) => new Map(rows.map((row) => [row.payment_id, BigInt(row.total)])),
      ),
    /** Everything confirmed as swept from each payment's deposit address (standing facts). */
    sweptTotals: (ids: ReadonlyArray<string>) =>
      Effect.map(
        sql`SELECT payment_id, sum(amount)::text AS total FROM billing.payment_facts
          WHERE payment_id = ANY (${ids}::text[]) AND kind = 'received' AND standing GROUP BY payment_id`.pipe(
          Effect.flatMap(decodeSums),
        ),
        (rows) => new Map(rows.map((row) => [row.payment_id, BigInt(row.total)])),
      ),

    /** Payments whose deposit address should be looked at by the sweeper (woken when this commits). */
    markSweepDue: (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.void
        : Effect.gen(function* () {
            yield* sql`UPDATE billing.payments SET sweep_due = true, updated_at = now()
              WHERE id = ANY (${ids}::text[])`;
            yield* sql`SELECT pg_notify(${DEPOSITS_CHANNEL}, '')`;
          }),
    /** The payments named, locked for update in id order. */
    lockMany: (ids: ReadonlyArray<string>) => lockRows(sql, PAYMENTS, ids),
    /**
     * The chain's payments whose deposit address should be swept now, locked, skipping those another
     * process holds: new funds arrived (`sweep_due`), no sweep of theirs is waiting to be mined, fewer
     * than `maxSweeps` sweeps so far, and either the funds waiting complete the payment or its time is up
     * (expired, canceled, already paid: top-ups). A partial payment waits for the rest before one sweep.
     * Not those whose sweep is held back at `at` (the service's time), nor those in `pausedTokens`.
     */
    lockSweepable: (
      chainId: number,
      now: number,
      maxSweeps: number,
      limit: number,
      at: Date,
      pausedTokens: ReadonlyArray<string>,
      skippedMerchants: ReadonlyArray<string>,
    ) =>
      select(
        [
          sql`p.chain_id = ${chainId}`,
          sql`p.sweep_due`,
          sql`p.sweeps < ${maxSweeps}`,
          sql`(p.closed OR p.expires_at <= ${now} OR p.status = 'paid' OR p.seen + p.received >= p.amount)`,
          sql`NOT EXISTS (SELECT 1 FROM billing.relayer_transactions r WHERE r.chain_id = p.chain_id
                AND r.purpose = p.sweep_purpose AND r.status = 'pending')`,
          sql`(p.sweep_retry_at IS NULL OR p.sweep_retry_at <= ${at})`,
          sql`NOT (lower(p.token_address) = ANY (${pausedTokens}::text[]))`,
          sql`NOT (p.merchant_id = ANY (${skippedMerchants}::text[]))`,
        ],
        { order: PAYMENTS.id, limit, lock: "update_skip_locked" },
      ),
    /** The sweeper looked: swept with `purpose` (a refused sweep before it is over), or (null) nothing to sweep for now. */
    recordSwept: (ids: ReadonlyArray<string>, purpose: string | null) =>
      ids.length === 0
        ? Effect.void
        : Effect.asVoid(sql`UPDATE billing.payments SET sweep_due = false,
              sweeps = sweeps + ${purpose === null ? 0 : 1},
              sweep_purpose = COALESCE(${purpose}, sweep_purpose),
              sweep_failure_code = NULL, sweep_failure_message = NULL, sweep_failed_since = NULL,
              sweep_retry_at = NULL, updated_at = now()
            WHERE id = ANY (${ids}::text[])`),
    /** The chain refused the payment's sweep alone: held back until `retryAt`, the episode begun at `since`. */
    recordSweepFailed: (id: string, failure: TransferFailure, since: Date, retryAt: Date) =>
      Effect.asVoid(sql`UPDATE billing.payments SET sweep_failure_code = ${failure.code},
          sweep_failure_message = ${failure.message}, sweep_failed_since = ${since},
          sweep_retry_at = ${retryAt}, updated_at = now() WHERE id = ${id}`),
    /** The chain refused the release of the payment's held funds alone: held back until `retryAt`. */
    recordReleaseFailed: (id: string, failure: TransferFailure, since: Date, retryAt: Date) =>
      Effect.asVoid(sql`UPDATE billing.payments SET release_failure_code = ${failure.code},
          release_failure_message = ${failure.message}, release_failed_since = ${since},
          release_retry_at = ${retryAt}, updated_at = now() WHERE id = ${id}`),
    /** The chain's payments whose sweep or release is held back beyond `at`, with the addresses it may name. */
    heldBack: (chainId: number, what: "sweep" | "release", at: Date) =>
      (what === "sweep"
        ? sql`SELECT id, sweep_failure_code AS code, lower(payee_address) AS payee_address,
              deposit_address, lower(token_address) AS token_address FROM billing.payments
            WHERE chain_id = ${chainId} AND sweep_failure_code IS NOT NULL AND sweep_retry_at > ${at}`
        : sql`SELECT id, release_failure_code AS code, lower(payee_address) AS payee_address,
              deposit_address, lower(token_address) AS token_address FROM billing.payments
            WHERE chain_id = ${chainId} AND release_failure_code IS NOT NULL AND release_retry_at > ${at}`
      ).pipe(Effect.flatMap(decodeHeldBack)),
    /** Held-back sweeps or releases to try at once (the address they name was cleared). */
    retryAt: (what: "sweep" | "release", ids: ReadonlyArray<string>, at: Date) =>
      ids.length === 0
        ? Effect.void
        : what === "sweep"
          ? Effect.asVoid(sql`UPDATE billing.payments SET sweep_retry_at = ${at}
              WHERE id = ANY (${ids}::text[]) AND sweep_failure_code IS NOT NULL`)
          : Effect.asVoid(sql`UPDATE billing.payments SET release_retry_at = ${at}
              WHERE id = ANY (${ids}::text[]) AND release_failure_code IS NOT NULL`),
    /** Sweeps whose transaction reverted or was superseded: due again. */
    retryRevertedSweeps:
      Effect.asVoid(sql`UPDATE billing.payments p SET sweep_due = true, sweep_purpose = NULL,
        updated_at = now()
      FROM billing.relayer_transactions r
      WHERE p.sweep_purpose IS NOT NULL AND r.chain_id = p.chain_id AND r.purpose = p.sweep_purpose
        AND r.status IN ('reverted', 'superseded')`),

    /**
     * Open payments whose time is up at `now` on their chain, locked, skipping others'. Not those whose
     * funds arrived and wait at the address for a sweep held back or a token in `pausedTokens` (they
     * are settled once swept): however many there are, they never take the place of payments that can
     * expire.
     */
    lockExpiring: (chainId: number, now: number, limit: number, pausedTokens: ReadonlyArray<string>) =>
      select(
        [
          sql`p.chain_id = ${chainId}`,
          sql`NOT p.closed`,
          sql`p.expires_at <= ${now}`,
          sql`NOT (p.seen > 0 AND (p.sweep_failure_code IS NOT NULL
                OR lower(p.token_address) = ANY (${pausedTokens}::text[])))`,
        ],
        { order: PAYMENTS.id, limit, lock: "update_skip_locked" },
      ),
    /**
     * Held payments whose hold ended, with no release or return under way, not held back at `at` and
     * not in `pausedTokens`; locked.
     */
    lockReleasable: (
      chainId: number,
      now: number,
      limit: number,
      at: Date,
      pausedTokens: ReadonlyArray<string>,
      skippedMerchants: ReadonlyArray<string>,
    ) =>
      select(
        [
          sql`p.chain_id = ${chainId}`,
          sql`p.held > 0`,
          sql`p.release_at <= ${now}`,
          sql`p.pending_action IS NULL`,
          sql`(p.release_retry_at IS NULL OR p.release_retry_at <= ${at})`,
          sql`NOT (lower(p.token_address) = ANY (${pausedTokens}::text[]))`,
          sql`NOT (p.merchant_id = ANY (${skippedMerchants}::text[]))`,
        ],
        { order: PAYMENTS.id, limit, lock: "update_skip_locked" },
      ),
    /** A release or return submitted for the payment's held funds; a refused release it follows is over. */
    startAction: (id: string, action: "release" | "return", purpose: string, returnTo: string | null) =>
      Effect.asVoid(sql`UPDATE billing.payments SET pending_action = ${action}, pending_action_purpose = ${purpose},
          return_to = COALESCE(${returnTo}, return_to), release_failure_code = NULL,
          release_failure_message = NULL, release_failed_since = NULL, release_retry_at = NULL, updated_at = now()
        WHERE id = ${id}`),
    /** Releases and returns whose transaction reverted are no longer under way. */
    clearRevertedActions: Effect.asVoid(sql`UPDATE billing.payments p SET pending_action = NULL,
        pending_action_purpose = NULL, updated_at = now()
      FROM billing.relayer_transactions r
      WHERE p.pending_action IS NOT NULL AND r.chain_id = p.chain_id AND r.purpose = p.pending_action_purpose
        AND r.status IN ('reverted', 'superseded')`),

    /**
     * Whether the chain has payments for the workers: deposit addresses due a sweep, open payments (for
     * expiry), held funds (for release), the sweeps and releases not held back at `at`. Lets an idle
     * worker skip asking the chain for its time.
     */
    workOn: (chainId: number, at: Date) =>
      Effect.map(
        sql`SELECT
            EXISTS (SELECT 1 FROM billing.payments WHERE chain_id = ${chainId} AND sweep_due
              AND (sweep_retry_at IS NULL OR sweep_retry_at <= ${at})) AS sweep_due,
            EXISTS (SELECT 1 FROM billing.payments WHERE chain_id = ${chainId} AND NOT closed) AS open,
            EXISTS (SELECT 1 FROM billing.payments WHERE chain_id = ${chainId} AND held > 0
              AND (release_retry_at IS NULL OR release_retry_at <= ${at})) AS held`.pipe(
          Effect.flatMap(
            decodeRows(
              Schema.Struct({ sweep_due: Schema.Boolean, open: Schema.Boolean, held: Schema.Boolean }),
            ),
          ),
        ),
        (rows) => rows[0] ?? { sweep_due: false, open: false, held: false },
      ),
    /** Deletes a chain's payments (the local stack's crash recovery). */
    forgetChain: (chainId: number) =>
      Effect.gen(function* () {
        yield* sql`DELETE FROM billing.payment_facts WHERE chain_id = ${chainId}`;
        yield* sql`DELETE FROM billing.payment_transfers WHERE chain_id = ${chainId}`;
        yield* sql`DELETE FROM billing.deposit_watch WHERE chain_id = ${chainId}`;
        const rows = yield* sql`DELETE FROM billing.payments WHERE chain_id = ${chainId} RETURNING id`;
        return rows.length;
      }),
  };
});

export class PaymentStore extends Context.Service<PaymentStore>()("PaymentStore", { make }) {
  static readonly layer = Layer.effect(PaymentStore, make);
}
