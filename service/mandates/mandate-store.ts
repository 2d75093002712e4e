/**
 * The one writer of `billing.mandates`. Every change to a mandate record goes through here: opened by
 * the API, first seen on chain, bound to the wallet that signs it, moved by chain facts (authorized,
 * revoked, charged, cap lowered), by a charge that failed for the customer's reasons, and by the
 * merchant's update of its cap (a raise waits in `pending_cap`; a lower is in force at once).
 */
import { randomBytes } from "node:crypto";
import { Context, Effect, Layer } from "effect";
import { SqlClient } from "effect/sql";
import { getAddress, type Hex } from "viem";
import { type Fragment, type PageRequest, pageRows, relation, selectRows } from "../db/query.ts";
import { firstOr, theRow } from "../db/rows.ts";
import { resourceMissing } from "../errors.ts";
import { newId } from "../ids.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { MANDATE_COLUMNS, MandateRow, type MandateStatus } from "./mandate-object.ts";

export const MANDATES = relation({
  from: "billing.mandates m",
  alias: "m",
  columns: MANDATE_COLUMNS,
  row: MandateRow,
});

export interface MandateFilters {
  readonly customer?: string;
  readonly status?: MandateStatus;
}

export interface NewMandate {
  readonly scope: MerchantScope;
  readonly chainId: number;
  readonly token: Hex;
  readonly cap: bigint;
  readonly approvalPeriods: number;
  readonly customer: string;
  readonly reference: string | null;
  readonly payee: Hex;
  readonly operator: Hex;
  readonly holdSeconds: number;
  /** Chain time (unix seconds) at which period 0 starts. */
  readonly anchor: number;
  /** The random lower 96 bits of the escrow's mandate id (the customer's address fills the rest). */
  readonly salt: bigint;
}

/** The terms a `MandateAuthorized` log carries. */
export interface AuthorizedTerms {
  readonly customer: Hex;
  readonly nonce: string;
  readonly approval: string;
  readonly cap: string;
  readonly approvalPeriods: number;
  readonly operator: Hex;
  readonly holdSeconds: number;
  /** Chain time of the signature's block. */
  readonly authorizedAt: number;
}

/** A new, unguessable authorization link token. */
const authorizationToken = () => randomBytes(24).toString("base64url");

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const inScope = (scope: MerchantScope): Fragment[] => [
    sql`m.merchant_id = ${scope.merchantId}`,
    sql`m.livemode = ${scope.livemode}`,
  ];
  const select = (where: ReadonlyArray<Fragment>, options?: Parameters<typeof selectRows>[3]) =>
    selectRows(sql, MANDATES, where, options);

  /** A mandate of the scope with these columns, a new id and link token; returns `returning` of it. */
  const insertReturning = (scope: MerchantScope, columns: Record<string, unknown>, returning: Fragment) =>
    Effect.flatMap(
      newId("mandate"),
      (id) =>
        sql`INSERT INTO billing.mandates ${sql.insert({
          id,
          merchant_id: scope.merchantId,
          livemode: scope.livemode,
          period: "month",
          authorization_token: authorizationToken(),
          ...columns,
        })} RETURNING ${returning}`,
    );

  /** As `insertReturning`, returning the new id. */
  const insertOne = (scope: MerchantScope, columns: Record<string, unknown>) =>
    Effect.map(insertReturning(scope, columns, sql`id`), (rows) => String(rows[0]?.id));

  /** A mandate our own code knows exists. */
  const reload = (id: string) => select([sql`m.id = ${id}`]).pipe(Effect.flatMap(theRow(`mandate ${id}`)));

  return {
    /** The merchant's mandate, or 404; `lock`: locked for update (inside a transaction). */
    load: (scope: MerchantScope, id: string, options: { readonly lock?: boolean } = {}) =>
      select([sql`m.id = ${id}`, ...inScope(scope)], options.lock ? { lock: "update" } : undefined).pipe(
        Effect.flatMap(firstOr(() => resourceMissing("mandate", id))),
      ),
    reload,
    byAuthorizationToken: (token: string) =>
      select([sql`m.authorization_token = ${token}`]).pipe(Effect.map((rows) => rows[0])),
    /**
     * The mandates named, each only in its own merchant scope, locked for update in id order (two
     * batches naming the same mandates cannot deadlock). Inside a transaction.
     */
    lockMany: (refs: ReadonlyArray<{ readonly scope: MerchantScope; readonly mandateId: string }>) => {
      if (refs.length === 0) return Effect.succeed([] as ReadonlyArray<MandateRow>);
      const ids = refs.map((r) => r.mandateId);
      return select(
        [
          sql`m.id = ANY (${ids}::text[])`,
          sql`(m.id, m.merchant_id, m.livemode) IN (SELECT * FROM unnest(${ids}::text[],
            ${refs.map((r) => r.scope.merchantId)}::text[], ${refs.map((r) => r.scope.livemode)}::boolean[]))`,
        ],
        { order: MANDATES.id, lock: "update" },
      );
    },
    /** A chain's mandates with these escrow ids, locked in id order: what chain facts apply to. */
    lockOnChain: (chainId: number, onchainIds: ReadonlyArray<string>) =>
      onchainIds.length === 0
        ? Effect.succeed([] as ReadonlyArray<MandateRow>)
        : select([sql`m.chain_id = ${chainId}`, sql`m.onchain_id = ANY (${onchainIds}::text[])`], {
            order: MANDATES.id,
            lock: "update",
          }),
    page: (scope: MerchantScope, filters: MandateFilters, page: PageRequest) =>
      pageRows(
        sql,
        MANDATES,
        [
          ...inScope(scope),
          ...(filters.customer !== undefined ? [sql`m.customer = ${filters.customer}`] : []),
          ...(filters.status !== undefined ? [sql`m.status = ${filters.status}`] : []),
        ],
        page,
      ),

    /** A mandate opened through the API, waiting for the customer's signature. */
    insert: (mandate: NewMandate) =>
      Effect.flatMap(
        insertReturning(
          mandate.scope,
          {
            origin: "api",
            chain_id: mandate.chainId,
            token_address: getAddress(mandate.token),
            cap: mandate.cap.toString(),
            approval_periods: mandate.approvalPeriods,
            customer: mandate.customer,
            reference: mandate.reference,
            payee_address: getAddress(mandate.payee),
            operator_address: getAddress(mandate.operator),
            hold_seconds: mandate.holdSeconds,
            anchor: mandate.anchor,
            salt: mandate.salt.toString(),
            status: "pending",
          },
          MANDATES.columns,
        ),
        // The new row as every read returns it, without reading it again.
        (rows) => Effect.flatMap(MANDATES.decode(rows), theRow("new mandate")),
      ),

    /**
     * A mandate signed directly on chain to a merchant's payout address, recorded the first time it is
     * seen (`origin: chain`) so that its events refer to an API object; returns its id.
     */
    insertFromChain: (mandate: {
      readonly scope: MerchantScope;
      readonly chainId: number;
      readonly onchainId: Hex;
      readonly token: Hex;
      readonly payee: Hex;
      readonly anchor: number;
      readonly salt: bigint;
      readonly terms: AuthorizedTerms;
    }) =>
      insertOne(mandate.scope, {
        origin: "chain",
        chain_id: mandate.chainId,
        token_address: getAddress(mandate.token),
        cap: mandate.terms.cap,
        approval_periods: mandate.terms.approvalPeriods,
        payee_address: getAddress(mandate.payee),
        operator_address: getAddress(mandate.terms.operator),
        hold_seconds: mandate.terms.holdSeconds,
        anchor: mandate.anchor,
        salt: mandate.salt.toString(),
        status: "active",
        customer_address: getAddress(mandate.terms.customer),
        onchain_id: mandate.onchainId,
      }),

    /**
     * Binds the mandate to the wallet whose signature is being submitted (the first one; a re-signature
     * must come from it). False when another wallet is bound already.
     */
    bindWallet: (id: string, customer: Hex, onchainId: Hex) =>
      Effect.map(
        sql`UPDATE billing.mandates
          SET customer_address = ${getAddress(customer)}, onchain_id = ${onchainId}, updated_at = now()
          WHERE id = ${id} AND (customer_address IS NULL OR lower(customer_address) = ${customer.toLowerCase()})
          RETURNING id`,
        (rows) => rows.length > 0,
      ),

    /**
     * Customers signed (or re-signed) on chain: each mandate is active under its signed terms (one entry
     * per mandate). Returns the rows as they now stand, in no particular order.
     */
    recordAuthorized: (
      authorized: ReadonlyArray<{ readonly mandateId: string; readonly terms: AuthorizedTerms }>,
    ) => {
      if (authorized.length === 0) return Effect.succeed([] as ReadonlyArray<MandateRow>);
      // The signed terms' columns are named apart from the mandate's, which RETURNING reads unqualified.
      const rows = authorized.map(({ mandateId, terms }) => ({
        signed_id: mandateId,
        signed_customer: getAddress(terms.customer),
        signed_nonce: terms.nonce,
        signed_approval: terms.approval,
        signed_cap: terms.cap,
        signed_periods: terms.approvalPeriods,
        signed_operator: getAddress(terms.operator),
        signed_hold: terms.holdSeconds,
        signed_at: terms.authorizedAt,
      }));
      return Effect.flatMap(
        sql`UPDATE billing.mandates m SET status = 'active', customer_address = v.signed_customer,
            signature_version = v.signed_nonce, approval_left = v.signed_approval, cap = v.signed_cap,
            approval_periods = v.signed_periods, operator_address = v.signed_operator,
            hold_seconds = v.signed_hold, authorized_at = to_timestamp(v.signed_at), updated_at = now(),
            pending_cap = CASE WHEN m.pending_cap <= v.signed_cap THEN NULL ELSE m.pending_cap END,
            pending_cap_requested_at = CASE WHEN m.pending_cap <= v.signed_cap THEN NULL
              ELSE m.pending_cap_requested_at END
          FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS v(signed_id text, signed_customer text,
            signed_nonce bigint, signed_approval numeric, signed_cap numeric, signed_periods int,
            signed_operator text, signed_hold bigint, signed_at bigint)
          WHERE m.id = ANY (${rows.map((r) => r.signed_id)}::text[]) AND m.id = v.signed_id
          RETURNING ${MANDATES.columns}`,
        MANDATES.decode,
      );
    },

    /**
     * The merchant's update of a mandate, as mandates.ts decided it: the cap of a mandate nobody signed
     * yet; a raise waiting for the signature (`pendingCap`, null: none); a lower in force at once, with
     * the approval left capped at cap × periods as `lowerCap` caps it on chain. Returns the row.
     */
    recordUpdate: (
      id: string,
      update: {
        readonly cap?: bigint;
        readonly pendingCap?: bigint | null;
        readonly reference?: string | null;
      },
    ) => {
      const { cap, pendingCap, reference } = update;
      const sets: Fragment[] = [sql`updated_at = now()`];
      // approval_left stays null before the first signature (LEAST would skip the null).
      if (cap !== undefined)
        sets.push(
          sql`cap = ${cap.toString()}`,
          sql`approval_left = CASE WHEN approval_left IS NULL THEN NULL
          ELSE LEAST(approval_left, ${cap.toString()}::numeric * approval_periods) END`,
        );
      if (pendingCap === null) sets.push(sql`pending_cap = NULL`, sql`pending_cap_requested_at = NULL`);
      else if (pendingCap !== undefined)
        sets.push(sql`pending_cap = ${pendingCap.toString()}`, sql`pending_cap_requested_at = now()`);
      if (reference !== undefined) sets.push(sql`reference = ${reference}`);
      return Effect.flatMap(
        sql`UPDATE billing.mandates SET ${sql.csv(sets)} WHERE id = ${id} RETURNING ${MANDATES.columns}`,
        (rows) => Effect.flatMap(MANDATES.decode(rows), theRow(`mandate ${id}`)),
      );
    },

    /**
     * The chain lowered the cap (`CapLowered`): never above a lower cap the merchant asked for since
     * (its transaction may still be pending), and the approval left as the chain says, within that cap.
     */
    recordCapLowered: (id: string, cap: string, approvalLeft: string) =>
      Effect.asVoid(sql`UPDATE billing.mandates SET cap = LEAST(cap, ${cap}::numeric),
          approval_left = LEAST(${approvalLeft}::numeric, LEAST(cap, ${cap}::numeric) * approval_periods),
          updated_at = now()
        WHERE id = ${id}`),

    recordRevoked: (id: string) =>
      Effect.asVoid(sql`UPDATE billing.mandates SET status = 'revoked', updated_at = now() WHERE id = ${id}`),

    /**
     * Charges that succeeded on chain, one entry per mandate (its latest): what the approval has left,
     * the period charged, and the charge; a mandate whose approval is spent now requires authorization.
     */
    recordCharged: (
      charged: ReadonlyArray<{
        readonly mandateId: string;
        readonly approvalLeft: string;
        readonly period: number;
        readonly chargeId: string;
      }>,
    ) => {
      if (charged.length === 0) return Effect.void;
      const rows = charged.map((c) => ({
        id: c.mandateId,
        approval_left: c.approvalLeft,
        period: c.period,
        charge: c.chargeId,
      }));
      return Effect.asVoid(sql`UPDATE billing.mandates m SET approval_left = v.approval_left,
          last_charged_period = v.period, latest_charge = v.charge, updated_at = now(),
          status = CASE WHEN v.approval_left = 0 AND m.status = 'active' THEN 'requires_authorization' ELSE m.status END
        FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS v(id text, approval_left numeric,
          period int, charge text)
        WHERE m.id = ANY (${rows.map((r) => r.id)}::text[]) AND m.id = v.id`);
    },

    /** Charges just submitted: each mandate's latest charge. */
    recordLatestCharges: (
      latest: ReadonlyArray<{ readonly mandateId: string; readonly chargeId: string }>,
    ) => {
      if (latest.length === 0) return Effect.void;
      const ids = latest.map((l) => l.mandateId);
      return Effect.asVoid(sql`UPDATE billing.mandates m SET latest_charge = v.charge, updated_at = now()
        FROM unnest(${ids}::text[], ${latest.map((l) => l.chargeId)}::text[]) AS v(mandate_id, charge)
        WHERE m.id = ANY (${ids}::text[]) AND m.id = v.mandate_id`);
    },

    /** A charge failed: the mandate's latest charge, and `requires_authorization` when the approval is spent. */
    recordChargeFailed: (id: string, chargeId: string, approvalExhausted: boolean) =>
      Effect.asVoid(sql`UPDATE billing.mandates SET latest_charge = ${chargeId}, updated_at = now(),
          status = CASE WHEN ${approvalExhausted} AND status = 'active' THEN 'requires_authorization' ELSE status END
        WHERE id = ${id}`),

    /** Deletes a chain's mandates (the local stack's crash recovery rebuilds them from the chain). */
    forgetChain: (chainId: number) =>
      Effect.map(
        sql`DELETE FROM billing.mandates WHERE chain_id = ${chainId} RETURNING id`,
        (rows) => rows.length,
      ),
  };
});

export class MandateStore extends Context.Service<MandateStore>()("MandateStore", { make }) {
  static readonly layer = Layer.effect(MandateStore, make);
}
