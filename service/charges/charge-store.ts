/**
 * The one writer of `billing.charges`: charges recorded when they are sent or refused for the
 * customer's reasons, moved by chain facts (succeeded, released, returned), by the workers (a release
 * under way, a transaction that reverted) and by the merchant (a return under way).
 */
import { Array as Arr, Context, Effect, Layer, Schema } from "effect";
import { SqlClient } from "effect/sql";
import { TRANSFER_FAILURE_CODES, type TransferFailure } from "../chains/blocked-transfers.ts";
import { type Fragment, type PageRequest, pageRows, relation, selectRows } from "../db/query.ts";
import { decodeRows, firstOr, theRow } from "../db/rows.ts";
import { resourceMissing } from "../errors.ts";
import { newId } from "../ids.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { CHARGE_COLUMNS, ChargeRow, type FailureCode } from "./charge-object.ts";

export const CHARGES = relation({
  from: "billing.charges c JOIN billing.mandates m ON m.id = c.mandate_id",
  alias: "c",
  columns: CHARGE_COLUMNS,
  row: ChargeRow,
});

/** Where a charge's log sits on chain. */
export interface ChainPosition {
  readonly blockNumber: string;
  readonly blockHash: string;
  readonly txHash: string;
  readonly logIndex: number;
  /** Chain time of the block. */
  readonly timestamp: string;
}

/** A `Charged` log: what the chain took, for which period, and when its hold ends (0: no hold). */
export interface Succeeded extends ChainPosition {
  readonly chargeId: string;
  readonly amount: string;
  readonly period: number;
  readonly releaseAt: number;
}

export interface NewPendingCharge {
  readonly scope: MerchantScope;
  readonly id: string;
  readonly mandateId: string;
  readonly chainId: number;
  readonly amount: bigint;
  readonly period: number;
  readonly onchainId: string;
  readonly relayerPurpose: string;
}

const decodeIds = decodeRows(Schema.Struct({ id: Schema.String }));
const decodeTaken = decodeRows(
  Schema.Struct({ mandate_id: Schema.String, period: Schema.Number, id: Schema.String }),
);
const decodeOnchainIds = decodeRows(Schema.Struct({ id: Schema.String, onchain_id: Schema.String }));
const Releasable = Schema.Struct({
  id: Schema.String,
  merchant_id: Schema.String,
  period: Schema.Number,
  onchain_id: Schema.String,
  mandate_onchain_id: Schema.String,
  payee_address: Schema.String,
  token_address: Schema.String,
  release_failed_since: Schema.NullOr(Schema.Date),
});
export type Releasable = typeof Releasable.Type;
const decodeReleasable = decodeRows(Releasable);
const decodeHeldBack = decodeRows(
  Schema.Struct({
    id: Schema.String,
    code: Schema.Literals(TRANSFER_FAILURE_CODES),
    payee_address: Schema.String,
    token_address: Schema.String,
  }),
);

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const select = (where: ReadonlyArray<Fragment>, options?: Parameters<typeof selectRows>[3]) =>
    selectRows(sql, CHARGES, where, options);
  const idOf = (rows: ReadonlyArray<{ readonly id: string }>) => rows[0]?.id;
  /** One charge of a mandate's period, with its status and what goes with it; returns its id. */
  const insertOne = (
    charge: {
      readonly scope: MerchantScope;
      readonly mandateId: string;
      readonly chainId: number;
      readonly period: number;
    },
    columns: Record<string, unknown>,
  ) =>
    Effect.gen(function* () {
      const id = yield* newId("charge");
      yield* sql`INSERT INTO billing.charges ${sql.insert({
        id,
        merchant_id: charge.scope.merchantId,
        livemode: charge.scope.livemode,
        mandate_id: charge.mandateId,
        chain_id: charge.chainId,
        period: charge.period,
        ...columns,
      })}`;
      return id;
    });

  return {
    /** The merchant's charge, or 404; locked for update when asked (inside a transaction). */
    load: (scope: MerchantScope, id: string, options: { readonly lock?: boolean } = {}) =>
      select(
        [sql`c.id = ${id}`, sql`c.merchant_id = ${scope.merchantId}`, sql`c.livemode = ${scope.livemode}`],
        options.lock ? { lock: "update" } : {},
      ).pipe(Effect.flatMap(firstOr(() => resourceMissing("charge", id)))),
    /** A charge our own code knows exists. */
    reload: (id: string) => select([sql`c.id = ${id}`]).pipe(Effect.flatMap(theRow(`charge ${id}`))),
    reloadMany: (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.succeed([] as ReadonlyArray<ChargeRow>)
        : select([sql`c.id = ANY (${ids}::text[])`]),
    pageForMandate: (mandateId: string, page: PageRequest) =>
      pageRows(sql, CHARGES, [sql`c.mandate_id = ${mandateId}`], page),

    /** For each (mandate, period), the charge that did not fail, if any; keyed `mandate:period`. */
    takenPeriods: (periods: ReadonlyArray<{ readonly mandateId: string; readonly period: number }>) =>
      periods.length === 0
        ? Effect.succeed(new Map<string, string>())
        : Effect.map(
            Effect.flatMap(
              sql`
              SELECT c.mandate_id, c.period, min(c.id) AS id
              FROM unnest(${periods.map((p) => p.mandateId)}::text[], ${periods.map((p) => p.period)}::int[])
                AS v(mandate_id, period)
              JOIN billing.charges c ON c.mandate_id = v.mandate_id AND c.period = v.period
              WHERE c.mandate_id = ANY (${periods.map((p) => p.mandateId)}::text[]) AND c.status <> 'failed'
              GROUP BY c.mandate_id, c.period`,
              decodeTaken,
            ),
            (rows) => new Map(rows.map((row) => [`${row.mandate_id}:${row.period}`, row.id])),
          ),
    /** The charge of a mandate's period that did not fail (the first recorded), if any. */
    periodCharge: (mandateId: string, period: number) =>
      sql`SELECT id FROM billing.charges
        WHERE mandate_id = ${mandateId} AND period = ${period} AND status <> 'failed'
        ORDER BY created_at LIMIT 1`.pipe(Effect.flatMap(decodeIds), Effect.map(idOf)),

    /** A charge refused for the customer's reasons (no transaction sent); returns its id. */
    insertFailed: (charge: {
      readonly scope: MerchantScope;
      readonly mandateId: string;
      readonly chainId: number;
      readonly amount: bigint;
      readonly period: number;
      readonly failureCode: FailureCode;
      readonly message: string;
    }) =>
      insertOne(charge, {
        amount: charge.amount.toString(),
        status: "failed",
        failure_code: charge.failureCode,
        failure_message: charge.message,
      }),
    /** Charges whose transaction is being sent (one relayer purpose for the batch). */
    insertPending: (charges: ReadonlyArray<NewPendingCharge>) =>
      !Arr.isReadonlyArrayNonEmpty(charges)
        ? Effect.void
        : Effect.asVoid(
            sql`INSERT INTO billing.charges ${sql.insert(
              Arr.map(charges, (charge) => ({
                id: charge.id,
                merchant_id: charge.scope.merchantId,
                livemode: charge.scope.livemode,
                mandate_id: charge.mandateId,
                chain_id: charge.chainId,
                amount: charge.amount.toString(),
                period: charge.period,
                status: "pending",
                onchain_id: charge.onchainId,
                relayer_purpose: charge.relayerPurpose,
              })),
            )}`,
          ),

    /**
     * A release or return submitted for a held charge, by the relayer purpose of its transaction; a
     * refused release it follows is over.
     */
    startAction: (id: string, action: "release" | "return", purpose: string) =>
      Effect.asVoid(sql`UPDATE billing.charges SET pending_action = ${action},
          pending_action_purpose = ${purpose}, release_failure_code = NULL, release_failure_message = NULL,
          release_failed_since = NULL, release_retry_at = NULL, updated_at = now() WHERE id = ${id}`),

    /**
     * Held charges whose hold ended at chain time `now`, on mandates naming one of `operators`, whose release is
     * not held back at `at` (the service's time) and whose token is not among `pausedTokens`; locked,
     * skipping others'.
     */
    lockReleasable: (
      chainId: number,
      now: number,
      operators: ReadonlyArray<string>,
      limit: number,
      at: Date,
      pausedTokens: ReadonlyArray<string>,
      skippedMerchants: ReadonlyArray<string>,
    ) =>
      sql`
        SELECT c.id, c.merchant_id, c.period, c.onchain_id, m.onchain_id AS mandate_onchain_id,
          lower(m.payee_address) AS payee_address, lower(m.token_address) AS token_address,
          c.release_failed_since
        FROM billing.charges c JOIN billing.mandates m ON m.id = c.mandate_id
        WHERE c.chain_id = ${chainId} AND c.status = 'succeeded' AND c.release_at > 0
          AND c.release_at <= ${now} AND c.pending_action IS NULL AND lower(m.operator_address) = ANY(${operators}::text[])
          AND (c.release_retry_at IS NULL OR c.release_retry_at <= ${at})
          AND NOT (lower(m.token_address) = ANY (${pausedTokens}::text[]))
          AND NOT (c.merchant_id = ANY (${skippedMerchants}::text[]))
        ORDER BY c.release_at LIMIT ${limit}
        FOR UPDATE OF c SKIP LOCKED`.pipe(Effect.flatMap(decodeReleasable)),
    /** The chain refused the charge's release alone: held back until `retryAt`, the episode begun at `since`. */
    recordReleaseFailed: (id: string, failure: TransferFailure, since: Date, retryAt: Date) =>
      Effect.asVoid(sql`UPDATE billing.charges SET release_failure_code = ${failure.code},
          release_failure_message = ${failure.message}, release_failed_since = ${since},
          release_retry_at = ${retryAt}, updated_at = now() WHERE id = ${id}`),
    /** The chain's charges whose release is held back beyond `at`, with the address the hold names. */
    heldBackReleases: (chainId: number, at: Date) =>
      sql`SELECT c.id, c.release_failure_code AS code, lower(m.payee_address) AS payee_address,
          lower(m.token_address) AS token_address
        FROM billing.charges c JOIN billing.mandates m ON m.id = c.mandate_id
        WHERE c.chain_id = ${chainId} AND c.release_failure_code IS NOT NULL AND c.release_retry_at > ${at}`.pipe(
        Effect.flatMap(decodeHeldBack),
      ),
    /** Held-back releases to try at once (the address they name was cleared). */
    retryReleasesAt: (ids: ReadonlyArray<string>, at: Date) =>
      ids.length === 0
        ? Effect.void
        : Effect.asVoid(sql`UPDATE billing.charges SET release_retry_at = ${at}
            WHERE id = ANY (${ids}::text[]) AND release_failure_code IS NOT NULL`),

    /** Pending charges whose transaction reverted or was superseded; locked, skipping others'. */
    lockReverted: (limit: number) =>
      sql`SELECT c.id FROM billing.charges c
        JOIN billing.relayer_transactions r ON r.chain_id = c.chain_id AND r.purpose = c.relayer_purpose
        WHERE c.status = 'pending' AND r.status IN ('reverted', 'superseded')
        ORDER BY c.id LIMIT ${limit} FOR UPDATE OF c SKIP LOCKED`.pipe(
        Effect.flatMap(decodeIds),
        Effect.map((rows) => rows.map((row) => row.id)),
      ),
    /** A pending charge whose transaction reverted: failed for the reason the chain gives now. */
    recordReverted: (id: string, failureCode: FailureCode, message: string) =>
      Effect.asVoid(sql`UPDATE billing.charges SET status = 'failed', failure_code = ${failureCode},
          failure_message = ${message}, onchain_id = NULL, updated_at = now() WHERE id = ${id}`),
    /** Releases and returns whose transaction reverted are no longer under way: they can be tried again. */
    clearRevertedActions: Effect.asVoid(sql`UPDATE billing.charges c SET pending_action = NULL,
        pending_action_purpose = NULL, updated_at = now()
      FROM billing.relayer_transactions r
      WHERE c.pending_action IS NOT NULL AND r.chain_id = c.chain_id AND r.purpose = c.pending_action_purpose
        AND r.status IN ('reverted', 'superseded')`),

    /** The chain's charges with these escrow ids, locked in id order (id by escrow id). */
    lockOnChain: (chainId: number, onchainIds: ReadonlyArray<string>) =>
      onchainIds.length === 0
        ? Effect.succeed(new Map<string, string>())
        : sql`SELECT id, onchain_id FROM billing.charges
            WHERE chain_id = ${chainId} AND onchain_id = ANY (${onchainIds}::text[])
            ORDER BY id FOR UPDATE`.pipe(
            Effect.flatMap(decodeOnchainIds),
            Effect.map((rows) => new Map(rows.map((row) => [row.onchain_id, row.id] as const))),
          ),
    /**
     * Our pending charge of a mandate whose transaction is `txHash`, locked: a transaction mined after a
     * period boundary charged the next period, under another escrow id than the one recorded.
     */
    lockSentIn: (chainId: number, mandateId: string, txHash: string) =>
      sql`SELECT c.id FROM billing.charges c
        JOIN billing.relayer_transactions r ON r.chain_id = c.chain_id AND r.purpose = c.relayer_purpose
        WHERE c.chain_id = ${chainId} AND c.mandate_id = ${mandateId} AND c.status = 'pending'
          AND ${txHash} = ANY(r.hashes)
        FOR UPDATE OF c`.pipe(Effect.flatMap(decodeIds), Effect.map(idOf)),
    /** A charge the chain made that this service did not send (another operator, or a lost record). */
    insertFromChain: (charge: {
      readonly scope: MerchantScope;
      readonly mandateId: string;
      readonly chainId: number;
      readonly onchainId: string;
      readonly amount: string;
      readonly period: number;
    }) => insertOne(charge, { amount: charge.amount, status: "succeeded", onchain_id: charge.onchainId }),
    /** Charges the chain made: succeeded, with the chain's amount, period, hold end and position. */
    recordSucceeded: (charges: ReadonlyArray<Succeeded>) => {
      if (charges.length === 0) return Effect.void;
      const rows = charges.map((c) => ({
        id: c.chargeId,
        amount: c.amount,
        period: c.period,
        release_at: c.releaseAt,
        block_number: c.blockNumber,
        block_hash: c.blockHash,
        tx_hash: c.txHash,
        log_index: c.logIndex,
        charged_at: c.timestamp,
      }));
      return Effect.asVoid(sql`UPDATE billing.charges c SET status = 'succeeded', amount = v.amount,
          period = v.period, release_at = v.release_at, block_number = v.block_number, block_hash = v.block_hash,
          tx_hash = v.tx_hash, log_index = v.log_index, charged_at = v.charged_at, updated_at = now()
        FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS v(id text, amount numeric, period int,
          release_at bigint, block_number bigint, block_hash text, tx_hash text, log_index int, charged_at bigint)
        WHERE c.id = ANY (${rows.map((r) => r.id)}::text[]) AND c.id = v.id`);
    },
    /** The escrow id the chain charged under (the next period's, for a transaction mined late). */
    recordOnchainId: (id: string, onchainId: string) =>
      Effect.asVoid(sql`UPDATE billing.charges SET onchain_id = ${onchainId} WHERE id = ${id}`),
    /** A held charge's hold ended: released to the merchant or returned to the customer. */
    recordEnded: (id: string, outcome: "released" | "returned", position: ChainPosition) =>
      Effect.asVoid(sql`UPDATE billing.charges SET status = ${outcome}, pending_action = NULL,
          pending_action_purpose = NULL, ended_block_number = ${position.blockNumber},
          ended_tx_hash = ${position.txHash}, ended_log_index = ${position.logIndex},
          ended_at = ${position.timestamp}, updated_at = now()
        WHERE id = ${id}`),

    /** Deletes a chain's charges (the local stack's crash recovery rebuilds them from the chain). */
    forgetChain: (chainId: number) =>
      Effect.map(
        sql`DELETE FROM billing.charges WHERE chain_id = ${chainId} RETURNING id`,
        (rows) => rows.length,
      ),
  };
});

export class ChargeStore extends Context.Service<ChargeStore>()("ChargeStore", { make }) {
  static readonly layer = Layer.effect(ChargeStore, make);
}
