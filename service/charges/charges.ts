/**
 * Charges against a mandate. A charge is checked (cap, period), simulated on chain, and only then
 * submitted through the relayer, which pays the gas; a charge that would fail spends nothing and is
 * recorded as failed with the reason the merchant can act on. Chain facts move a submitted charge to
 * succeeded, released or returned (events/fact-application.ts).
 */
import { PgClient } from "@effect/sql-pg";
import { Array as Arr, Context, Effect, Layer, Result, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { encodeAbiParameters, type Hex, keccak256 } from "viem";
import { periodIndexAt, periodStart } from "../../src/ledger/period.ts";
import type { Caller } from "../auth/api-keys.ts";
import {
  ChainClients,
  type ChainUnavailable,
  type EscrowRevert,
  escrowCallData,
} from "../chains/chain-clients.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer, type RelayerError, relayerBudgetExhausted } from "../chains/relayer.ts";
import { decodeRows, firstOr, theRow } from "../db/rows.ts";
import { InvalidRequest, invalidParam, NotFound, Unavailable } from "../errors.ts";
import { raiseEvent } from "../events/outbox.ts";
import { newId } from "../ids.ts";
import type { MandateRow } from "../mandates/mandate-object.ts";
import { Mandates, notFoundMandate } from "../mandates/mandates.ts";
import { parseDecimal } from "../money/decimal.ts";
import { PageQuery, pageOf } from "../pagination.ts";
import { classifyChargeRevert } from "./charge-failures.ts";
import { CHARGE_COLUMNS, type ChargeObject, ChargeRow, toChargeObject } from "./charge-object.ts";

export const CreateCharge = Schema.Struct({
  amount_decimal: Schema.String.annotate({
    description: "Amount in the token's units, at most the mandate's cap, e.g. \"19.99\"",
  }),
}).annotate({ identifier: "CreateChargeRequest" });
export type CreateCharge = typeof CreateCharge.Type;

export const ListChargesQuery = Schema.Struct({ ...PageQuery.fields }).annotate({
  identifier: "ListChargesQuery",
});
export type ListChargesQuery = typeof ListChargesQuery.Type;

const decodeCharges = decodeRows(ChargeRow);

/** The escrow's charge id: one per mandate and period. */
export const onchainChargeId = (mandateId: Hex, period: number): Hex =>
  keccak256(encodeAbiParameters([{ type: "bytes32" }, { type: "uint32" }], [mandateId, period]));

/**
 * One charge attempt's transaction. The charge id makes each attempt's purpose new: after a charge whose
 * transaction reverted failed, a retry in the same period is a new charge and sends its own transaction.
 */
export const chargePurpose = (chainId: number, onchainId: string, chargeId: string) =>
  `charge:${chainId}:${onchainId}:${chargeId}`;

export const notFoundCharge = (id: string) =>
  new NotFound({ code: "resource_missing", message: `No such charge: '${id.slice(0, 80)}'`, param: "id" });

const unavailable = (error: ChainUnavailable | RelayerError) =>
  error._tag === "RelayerError" && error.reason === "budget_exhausted"
    ? relayerBudgetExhausted
    : new Unavailable({
        code: "chain_unavailable",
        message: `The chain did not answer (${error.message}). Nothing was charged; retry later.`,
      });

type Failure = InvalidRequest | NotFound | Unavailable | SqlError.SqlError;

export interface ChargeRequest {
  readonly caller: Caller;
  readonly mandateId: string;
  readonly input: CreateCharge;
}

/** A charge request that passed the service's checks, ready to simulate and send. */
interface Prepared {
  readonly mandate: MandateRow;
  readonly chain: ResolvedChain;
  readonly amount: bigint;
  readonly period: number;
  readonly onchainId: Hex;
}

const chargeManyArgs = (batch: readonly Prepared[]) => [
  batch.map((p) => p.onchainId),
  batch.map((p) => p.amount),
];

export class Charges extends Context.Service<
  Charges,
  {
    readonly create: (
      caller: Caller,
      mandateId: string,
      input: CreateCharge,
    ) => Effect.Effect<ChargeObject, Failure>;
    /**
     * Several charges at once (billing's period boundary): each checked like `create`, then each chain's
     * charges simulated and sent as one `chargeMany` transaction. One result per request, in order.
     */
    readonly createMany: (
      requests: readonly ChargeRequest[],
    ) => Effect.Effect<
      readonly Result.Result<ChargeObject, InvalidRequest | NotFound>[],
      Unavailable | SqlError.SqlError
    >;
    readonly retrieve: (
      caller: Caller,
      id: string,
    ) => Effect.Effect<ChargeObject, NotFound | SqlError.SqlError>;
    readonly listForMandate: (
      caller: Caller,
      mandateId: string,
      query: ListChargesQuery,
    ) => Effect.Effect<
      { object: "list"; data: ChargeObject[]; has_more: boolean },
      NotFound | SqlError.SqlError
    >;
    readonly returnCharge: (caller: Caller, id: string) => Effect.Effect<ChargeObject, Failure>;
    readonly reload: (id: string) => Effect.Effect<ChargeRow, SqlError.SqlError>;
    readonly reloadMany: (ids: readonly string[]) => Effect.Effect<readonly ChargeRow[], SqlError.SqlError>;
    readonly render: (row: ChargeRow) => ChargeObject;
    /** One pass of the outcome worker; returns how many charges failed. */
    readonly resolveReverted: Effect.Effect<number, SqlError.SqlError>;
  }
>()("Charges") {
  static readonly layer = Layer.effect(
    Charges,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const pg = yield* PgClient.PgClient;
      const registry = yield* ChainRegistry;
      const clients = yield* ChainClients;
      const relayer = yield* Relayer;
      const mandates = yield* Mandates;
      const chainOf = (id: number) => registry.byId(id);
      const render = (row: ChargeRow) => toChargeObject(row, chainOf(row.chain_id));

      const select = (where: string, params: unknown[], suffix = "") =>
        sql
          .unsafe(
            `SELECT ${CHARGE_COLUMNS} FROM billing.charges c JOIN billing.mandates m ON m.id = c.mandate_id
             WHERE ${where} ${suffix}`,
            params,
          )
          .pipe(Effect.flatMap(decodeCharges));

      const reload = (id: string) => select("c.id = $1", [id]).pipe(Effect.flatMap(theRow(`charge ${id}`)));
      const reloadMany = (ids: readonly string[]) =>
        ids.length === 0 ? Effect.succeed([] as readonly ChargeRow[]) : select("c.id = ANY($1)", [ids]);

      const load = (caller: Caller, id: string, forUpdate = false) =>
        select(
          "c.id = $1 AND c.merchant_id = $2 AND c.livemode = $3",
          [id, caller.merchantId, caller.livemode],
          forUpdate ? "FOR UPDATE OF c" : "",
        ).pipe(Effect.flatMap(firstOr(() => notFoundCharge(id))));

      /** Records a charge the customer's situation prevents, and tells the merchant by event. */
      const recordFailure = (
        mandate: MandateRow,
        amount: bigint,
        period: number,
        failureCode: "insufficient_funds" | "approval_exhausted" | "processing_error",
        message: string,
      ) =>
        Effect.gen(function* () {
          const id = yield* newId("charge");
          yield* sql`INSERT INTO billing.charges ${sql.insert({
            id,
            merchant_id: mandate.merchant_id,
            livemode: mandate.livemode,
            mandate_id: mandate.id,
            chain_id: mandate.chain_id,
            amount: amount.toString(),
            period,
            status: "failed",
            failure_code: failureCode,
            failure_message: message,
          })}`;
          yield* markFailed(mandate, id, failureCode);
          return id;
        });

      /** After a failed charge: the mandate's status and the event that tells the merchant what to do. */
      const markFailed = (
        mandate: MandateRow,
        chargeId: string,
        failureCode: "insufficient_funds" | "approval_exhausted" | "processing_error",
      ) =>
        Effect.gen(function* () {
          yield* sql`UPDATE billing.mandates SET latest_charge = ${chargeId}, updated_at = now(),
              status = CASE WHEN ${failureCode} = 'approval_exhausted' AND status = 'active'
                            THEN 'requires_authorization' ELSE status END
            WHERE id = ${mandate.id}`;
          const type =
            failureCode === "insufficient_funds"
              ? "mandate.insufficient"
              : failureCode === "approval_exhausted"
                ? "mandate.requires_authorization"
                : undefined;
          if (type === undefined) return;
          const updated = yield* mandates.reload(mandate.id);
          yield* raiseEvent({
            merchantId: mandate.merchant_id,
            livemode: mandate.livemode,
            type,
            object: mandates.render(updated),
            key: `${chargeId}:${type}`,
          }).pipe(Effect.provideService(PgClient.PgClient, pg));
        });

      /**
       * Checks a charge request against its mandate, locked by the caller (one mandate's charges are
       * decided in turn); whether the period is already charged is checked for the batch afterwards.
       */
      const prepare = (
        request: ChargeRequest,
        mandate: MandateRow | undefined,
        chainTime: (chain: ResolvedChain) => Effect.Effect<number, Unavailable>,
      ) =>
        Effect.gen(function* () {
          const { mandateId, input } = request;
          if (mandate === undefined) return yield* notFoundMandate(mandateId);
          const chain = chainOf(mandate.chain_id);
          const rendered = mandates.render(mandate);
          if (!chain) return yield* Effect.die(new Error(`mandate ${mandate.id} is on an unknown chain`));
          const decimals = chain.tokens.find(
            (t) => t.address.toLowerCase() === mandate.token_address.toLowerCase(),
          )?.decimals;
          if (decimals === undefined)
            return yield* Effect.die(new Error(`mandate ${mandate.id} has an unknown token`));
          const parsed = parseDecimal(input.amount_decimal, decimals, 2n ** 256n - 1n);
          if (Result.isFailure(parsed))
            return yield* invalidParam("amount_decimal", `amount_decimal ${parsed.failure.message}.`);
          const amount = parsed.success;
          if (amount > BigInt(mandate.cap))
            return yield* new InvalidRequest({
              code: "mandate_cap_exceeded",
              message: `amount_decimal ${input.amount_decimal} exceeds the mandate's cap of ${rendered.cap_decimal} ${rendered.token} per period. Raising the cap needs the customer's new signature; open a new mandate with a higher cap_decimal.`,
              param: "amount_decimal",
            });
          if (mandate.status === "revoked")
            return yield* new InvalidRequest({
              code: "mandate_revoked",
              message: "The customer revoked this mandate; it cannot be charged again.",
              param: null,
            });
          if (mandate.onchain_id === null)
            return yield* new InvalidRequest({
              code: "mandate_not_authorized",
              message: "The customer has not signed this mandate yet: send them to its authorization_url.",
              param: null,
            });
          if (relayer.address === undefined)
            return yield* new Unavailable({
              code: "relayer_unavailable",
              message: "This service has no relayer key configured, so it cannot send charges.",
            });
          if (mandate.operator_address.toLowerCase() !== relayer.address.toLowerCase())
            return yield* new InvalidRequest({
              code: "mandate_not_chargeable",
              message:
                "This mandate names another operator than this service, so the service cannot charge it.",
              param: null,
            });
          const now = yield* chainTime(chain);
          const period = periodIndexAt(mandate.anchor, now);
          if (period === undefined)
            return yield* new InvalidRequest({
              code: "mandate_not_started",
              message: `The mandate's first period starts at ${mandate.anchor} (unix seconds).`,
              param: null,
            });
          const prepared: Prepared = { mandate, chain, amount, period, onchainId: mandate.onchain_id as Hex };
          return prepared;
        });

      /** The charge (not failed) already recorded for each mandate and period, keyed `mandate:period`. */
      const chargesOfPeriods = (batch: readonly Prepared[]) =>
        batch.length === 0
          ? Effect.succeed(new Map<string, string>())
          : sql<{ mandate_id: string; period: number; id: string }>`
              SELECT c.mandate_id, c.period, min(c.id) AS id
              FROM unnest(${batch.map((p) => p.mandate.id)}::text[], ${batch.map((p) => p.period)}::int[])
                AS v(mandate_id, period)
              JOIN billing.charges c ON c.mandate_id = v.mandate_id AND c.period = v.period
              WHERE c.mandate_id = ANY (${batch.map((p) => p.mandate.id)}::text[]) AND c.status <> 'failed'
              GROUP BY c.mandate_id, c.period`.pipe(
              Effect.map((rows) => new Map(rows.map((row) => [`${row.mandate_id}:${row.period}`, row.id]))),
            );

      /**
       * Each charge's simulated outcome (undefined: it would succeed). A batch is simulated whole first:
       * `chargeMany` is all-or-nothing, so a batch that would revert is split in halves until the charges
       * that fail are found on their own.
       */
      const simulateBatch = (
        chain: ResolvedChain,
        batch: readonly Prepared[],
      ): Effect.Effect<readonly (EscrowRevert | undefined)[], Unavailable> => {
        const [only] = batch;
        if (only === undefined) return Effect.succeed([]);
        if (batch.length === 1) return Effect.map(simulate(chain, only.mandate, only.amount), (r) => [r]);
        return clients
          .simulateEscrow(chain, only.mandate.operator_address as Hex, "chargeMany", chargeManyArgs(batch))
          .pipe(
            Effect.as(batch.map(() => undefined)),
            Effect.catchTag("EscrowRevert", () => {
              const half = Math.ceil(batch.length / 2);
              return Effect.map(
                Effect.all([
                  simulateBatch(chain, batch.slice(0, half)),
                  simulateBatch(chain, batch.slice(half)),
                ]),
                ([a, b]) => [...a, ...b],
              );
            }),
            Effect.mapError((error) => (error._tag === "ChainUnavailable" ? unavailable(error) : error)),
          );
      };

      /** Records one chain's checked charges and sends those that would succeed in one transaction. */
      const sendBatch = (chain: ResolvedChain, batch: readonly Prepared[]) =>
        Effect.gen(function* () {
          const outcomes = yield* simulateBatch(chain, batch);
          const results: Result.Result<string, InvalidRequest>[] = [];
          const sending: { prepared: Prepared; id: string }[] = [];
          for (const [i, prepared] of batch.entries()) {
            const outcome = outcomes[i];
            if (outcome === undefined) {
              const id = yield* newId("charge");
              sending.push({ prepared, id });
              results.push(Result.succeed(id));
              continue;
            }
            const classified = classifyChargeRevert(outcome.errorName);
            if (classified.kind === "refuse")
              results.push(
                Result.fail(
                  classified.code === "period_already_charged"
                    ? alreadyCharged(prepared.mandate, prepared.period, undefined)
                    : new InvalidRequest({ code: classified.code, message: classified.message, param: null }),
                ),
              );
            else
              results.push(
                Result.succeed(
                  yield* recordFailure(
                    prepared.mandate,
                    prepared.amount,
                    prepared.period,
                    classified.failureCode,
                    classified.message,
                  ),
                ),
              );
          }
          if (!Arr.isReadonlyArrayNonEmpty(sending)) return results;
          const single = sending[0];
          const purpose =
            sending.length === 1
              ? chargePurpose(
                  chain.id,
                  onchainChargeId(single.prepared.onchainId, single.prepared.period),
                  single.id,
                )
              : `charges:${chain.id}:${yield* newId("request")}`;
          yield* sql`INSERT INTO billing.charges ${sql.insert(
            Arr.map(sending, ({ prepared, id }) => ({
              id,
              merchant_id: prepared.mandate.merchant_id,
              livemode: prepared.mandate.livemode,
              mandate_id: prepared.mandate.id,
              chain_id: chain.id,
              amount: prepared.amount.toString(),
              period: prepared.period,
              status: "pending",
              onchain_id: onchainChargeId(prepared.onchainId, prepared.period),
              relayer_purpose: purpose,
            })),
          )}`;
          const mandateIds = sending.map(({ prepared }) => prepared.mandate.id);
          yield* sql`UPDATE billing.mandates m SET latest_charge = v.charge, updated_at = now()
            FROM unnest(${mandateIds}::text[], ${sending.map(({ id }) => id)}::text[]) AS v(mandate_id, charge)
            WHERE m.id = ANY (${mandateIds}::text[]) AND m.id = v.mandate_id`;
          // Recorded in this transaction; broadcast once it commits (never for a rollback).
          yield* relayer
            .submit(chain.id, {
              to: chain.escrow.address,
              data:
                sending.length === 1
                  ? escrowCallData("charge", [single.prepared.onchainId, single.prepared.amount])
                  : escrowCallData("chargeMany", chargeManyArgs(sending.map((s) => s.prepared))),
              purpose,
            })
            .pipe(Effect.catchTag("RelayerError", (e) => Effect.fail(unavailable(e))));
          return results;
        });

      const createMany = (requests: readonly ChargeRequest[]) =>
        Effect.gen(function* () {
          const times = new Map<number, number>();
          const chainTime = (chain: ResolvedChain) =>
            times.has(chain.id)
              ? Effect.succeed(times.get(chain.id) as number)
              : clients.latestTime(chain).pipe(
                  Effect.tap((now) => Effect.sync(() => times.set(chain.id, now))),
                  Effect.mapError(unavailable),
                );
          const locked = new Map((yield* mandates.lockMany(requests)).map((row) => [row.id, row] as const));
          const seen = new Set<string>();
          const screened = yield* Effect.forEach(requests, (request) =>
            (seen.has(request.mandateId)
              ? Effect.fail(
                  new InvalidRequest({
                    code: "period_already_charged",
                    message: "Another charge of this mandate is in the same batch.",
                    param: null,
                  }),
                )
              : Effect.andThen(
                  Effect.sync(() => seen.add(request.mandateId)),
                  prepare(request, locked.get(request.mandateId), chainTime),
                )
            ).pipe(
              Effect.map((prepared) => ({ prepared })),
              Effect.catchTags({
                InvalidRequest: (refused) => Effect.succeed({ refused }),
                NotFound: (refused) => Effect.succeed({ refused }),
              }),
            ),
          );
          const taken = yield* chargesOfPeriods(
            screened.flatMap((item) => ("prepared" in item ? [item.prepared] : [])),
          );
          const checked = screened.map((item) => {
            if ("refused" in item) return item;
            const { mandate, period } = item.prepared;
            const takenBy = taken.get(`${mandate.id}:${period}`);
            return takenBy !== undefined || (mandate.last_charged_period ?? -1) >= period
              ? { refused: alreadyCharged(mandate, period, takenBy) }
              : item;
          });
          const results: Result.Result<ChargeObject, InvalidRequest | NotFound>[] = [];
          const byChain = new Map<number, { index: number; prepared: Prepared }[]>();
          for (const [index, item] of checked.entries()) {
            if ("refused" in item) results[index] = Result.fail(item.refused);
            else {
              const group = byChain.get(item.prepared.chain.id) ?? [];
              group.push({ index, prepared: item.prepared });
              byChain.set(item.prepared.chain.id, group);
            }
          }
          for (const group of byChain.values()) {
            const [first] = group;
            if (!first) continue;
            const sent = yield* sendBatch(
              first.prepared.chain,
              group.map((g) => g.prepared),
            );
            const ids = sent.flatMap((outcome) => (Result.isSuccess(outcome) ? [outcome.success] : []));
            const rows = new Map((yield* reloadMany(ids)).map((row) => [row.id, render(row)] as const));
            for (const [i, { index }] of group.entries()) {
              const outcome = sent[i] as Result.Result<string, InvalidRequest>;
              const charge = Result.isSuccess(outcome) ? rows.get(outcome.success) : undefined;
              results[index] = Result.isSuccess(outcome)
                ? charge
                  ? Result.succeed(charge)
                  : yield* Effect.die(new Error(`charge ${outcome.success} vanished`))
                : Result.fail(outcome.failure);
            }
          }
          return results;
        });

      const create = (caller: Caller, mandateId: string, input: CreateCharge) =>
        Effect.flatMap(createMany([{ caller, mandateId, input }]), ([result]) =>
          result === undefined ? Effect.die(new Error("no charge result")) : Effect.fromResult(result),
        );

      const alreadyCharged = (mandate: MandateRow, period: number, chargeId: string | undefined) =>
        new InvalidRequest({
          code: "period_already_charged",
          message: `This mandate was already charged for period ${period}${chargeId ? ` (${chargeId})` : ""}, which runs until ${new Date(periodStart(mandate.anchor, period + 1) * 1000).toISOString()}. A mandate is charged at most once per period.`,
          param: null,
        });

      /** undefined when the charge would succeed; otherwise the contract's reason. */
      const simulate = (chain: ResolvedChain, mandate: MandateRow, amount: bigint) =>
        clients
          .simulateEscrow(chain, mandate.operator_address as Hex, "charge", [mandate.onchain_id, amount])
          .pipe(
            Effect.as(undefined),
            Effect.catchTag("EscrowRevert", (revert: EscrowRevert) => Effect.succeed(revert)),
            Effect.mapError(unavailable),
          );

      const retrieve = (caller: Caller, id: string) => Effect.map(load(caller, id), render);

      const listForMandate = (caller: Caller, mandateId: string, query: ListChargesQuery) =>
        Effect.gen(function* () {
          yield* mandates.load(caller, mandateId);
          const limit = query.limit ?? 10;
          const params: unknown[] = [mandateId];
          let where = "c.mandate_id = $1";
          if (query.starting_after !== undefined) {
            params.push(query.starting_after);
            where += " AND c.id < $2";
          }
          const rows = yield* select(where, params, `ORDER BY c.id DESC LIMIT ${limit + 1}`);
          return pageOf(rows.map(render), limit);
        });

      const returnCharge = (caller: Caller, id: string) =>
        Effect.gen(function* () {
          const charge = yield* load(caller, id, true);
          const chain = chainOf(charge.chain_id);
          if (!chain) return yield* Effect.die(new Error(`charge ${id} is on an unknown chain`));
          const refuse = (why: string) =>
            new InvalidRequest({ code: "charge_not_returnable", message: why, param: null });
          if (charge.status !== "succeeded" || charge.release_at === null || charge.release_at === 0)
            return yield* refuse(
              charge.status === "succeeded"
                ? "This charge was paid straight to you (no escrow hold), so the escrow cannot return it."
                : `Only a charge held in escrow can be returned; this one is ${charge.status}.`,
            );
          if (charge.pending_action !== null)
            return yield* refuse(`A ${charge.pending_action} of this charge is already under way.`);
          const now = yield* clients.latestTime(chain).pipe(Effect.mapError(unavailable));
          if (now >= charge.release_at)
            return yield* refuse("The hold has ended; the money is being released to you.");
          const mandate = yield* mandates.load(caller, charge.mandate_id);
          const simulated = yield* clients
            .simulateEscrow(chain, mandate.operator_address as Hex, "returnCharge", [
              mandate.onchain_id,
              charge.period,
            ])
            .pipe(
              Effect.as(undefined),
              Effect.catchTag("EscrowRevert", (revert: EscrowRevert) => Effect.succeed(revert)),
              Effect.mapError(unavailable),
            );
          if (simulated !== undefined)
            return yield* refuse(`The escrow refused the return (${simulated.errorName}).`);
          // Each return attempt is its own transaction (a return that reverted can be asked again); the
          // action lets at most one be pending or mined.
          const action = `return:${chain.id}:${charge.onchain_id}`;
          const sent = yield* relayer
            .submit(chain.id, {
              to: chain.escrow.address,
              data: escrowCallData("returnCharge", [mandate.onchain_id, charge.period]),
              purpose: `${action}:${yield* newId("request")}`,
              action,
            })
            .pipe(Effect.catchTag("RelayerError", (e) => Effect.fail(unavailable(e))));
          yield* sql`UPDATE billing.charges SET pending_action = 'return', pending_action_purpose = ${sent.purpose},
              updated_at = now() WHERE id = ${id}`;
          return render(yield* reload(id));
        });

      /**
       * Charges whose transaction reverted on chain (a race: funds moved between simulation and mining)
       * fail with the reason the chain gives now; releases and returns that reverted are cleared so the
       * hold worker or the merchant can try again.
       */
      const resolveReverted = Effect.gen(function* () {
        const reverted = yield* sql.withTransaction(
          Effect.gen(function* () {
            const rows = yield* sql<{ id: string }>`SELECT c.id FROM billing.charges c
              JOIN billing.relayer_transactions r ON r.chain_id = c.chain_id AND r.purpose = c.relayer_purpose
              WHERE c.status = 'pending' AND r.status IN ('reverted', 'superseded')
              ORDER BY c.id LIMIT 100 FOR UPDATE OF c SKIP LOCKED`;
            for (const { id } of rows) {
              const charge = yield* reload(id);
              const mandate = yield* mandates.reload(charge.mandate_id);
              const chain = chainOf(charge.chain_id);
              const outcome = chain
                ? yield* simulate(chain, mandate, BigInt(charge.amount)).pipe(
                    Effect.catch(() => Effect.succeed(undefined)),
                  )
                : undefined;
              const classified = classifyChargeRevert(outcome?.errorName);
              const failureCode = classified.kind === "fail" ? classified.failureCode : "processing_error";
              yield* sql`UPDATE billing.charges SET status = 'failed', failure_code = ${failureCode},
                  failure_message = ${classified.message}, onchain_id = NULL, updated_at = now()
                WHERE id = ${id}`;
              yield* markFailed(mandate, id, failureCode);
            }
            return rows.length;
          }),
        );
        yield* sql`UPDATE billing.charges c SET pending_action = NULL, pending_action_purpose = NULL, updated_at = now()
          FROM billing.relayer_transactions r
          WHERE c.pending_action IS NOT NULL AND r.chain_id = c.chain_id AND r.purpose = c.pending_action_purpose
            AND r.status IN ('reverted', 'superseded')`;
        return reverted;
      });

      return {
        create,
        createMany,
        retrieve,
        listForMandate,
        returnCharge,
        reload,
        reloadMany,
        render,
        resolveReverted,
      };
    }),
  );
}
