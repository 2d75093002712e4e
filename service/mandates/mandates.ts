/**
 * Mandates as merchants open and read them. A mandate record fixes the terms the customer will sign
 * (chain, token, payee, cap, approval periods, anchor, hold, operator); chain facts then move its status
 * (see events/fact-application.ts) and charges spend it (see charges/charges.ts).
 */
import { randomBytes } from "node:crypto";
import { Context, Effect, Layer, Result, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { getAddress } from "viem";
import type { Caller } from "../auth/api-keys.ts";
import { ChainClients } from "../chains/chain-clients.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { MerchantChains } from "../chains/merchant-chains.ts";
import type { MerchantChainObject } from "../chains/objects.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { PublicUrl } from "../config/public-url.ts";
import { decodeRows, firstOr, theRow } from "../db/rows.ts";
import { type InvalidRequest, invalidParam, NotFound, Unavailable } from "../errors.ts";
import { newId } from "../ids.ts";
import { MAX_CAP_UNITS, parseDecimal } from "../money/decimal.ts";
import { PageQuery, pageOf } from "../pagination.ts";
import {
  MANDATE_COLUMNS,
  MANDATE_STATUSES,
  type MandateObject,
  MandateRow,
  toMandateObject,
} from "./mandate-object.ts";

export const DEFAULT_APPROVAL_PERIODS = 12;
export const MAX_APPROVAL_PERIODS = 120;

const Text = (max: number) => Schema.String.check(Schema.isBetweenLength(1, max));

export const CreateMandate = Schema.Struct({
  cap_decimal: Schema.String.annotate({
    description: 'Most that may be collected per period, in the token\'s units, e.g. "25.00"',
  }),
  period: Schema.String.annotate({ description: "Billing period: `month` (the only one)" }),
  customer: Text(500).annotate({ description: "Your reference for the customer" }),
  reference: Schema.optionalKey(
    Schema.NullOr(Text(500)).annotate({ description: "Your own reference for this mandate" }),
  ),
  chain: Schema.optionalKey(
    Schema.Int.annotate({
      description:
        "EIP-155 chain id; default: your only configured chain of this mode where subscriptions_available is true",
    }),
  ),
  token: Schema.optionalKey(
    Schema.String.annotate({
      description: "Token symbol or address; default: the only token you accept on the chain",
    }),
  ),
  approval_periods: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: MAX_APPROVAL_PERIODS })).annotate({
      description: `Periods one signature covers (approval = cap × approval_periods), 1-${MAX_APPROVAL_PERIODS}, default ${DEFAULT_APPROVAL_PERIODS}`,
    }),
  ),
}).annotate({ identifier: "CreateMandateRequest" });
export type CreateMandate = typeof CreateMandate.Type;

export const ListMandatesQuery = Schema.Struct({
  ...PageQuery.fields,
  customer: Schema.optionalKey(Text(500).annotate({ description: "Only this customer's mandates" })),
  status: Schema.optionalKey(Schema.Literals(MANDATE_STATUSES)),
}).annotate({ identifier: "ListMandatesQuery" });
export type ListMandatesQuery = typeof ListMandatesQuery.Type;

const decodeMandates = decodeRows(MandateRow);

export const notFoundMandate = (id: string) =>
  new NotFound({ code: "resource_missing", message: `No such mandate: '${id.slice(0, 80)}'`, param: "id" });

/** The merchant's chain configuration a mandate is opened on, from `chain` or the only one configured. */
export const chooseChain = (
  registry: ChainRegistry["Service"],
  caller: Caller,
  configured: readonly MerchantChainObject[],
  requested: number | undefined,
): Effect.Effect<{ chain: ResolvedChain; config: MerchantChainObject }, InvalidRequest> => {
  if (requested !== undefined) {
    const chain = registry.find(requested, caller.livemode);
    if (!chain)
      return Effect.fail(
        invalidParam(
          "chain",
          `No such ${caller.livemode ? "live" : "test"} chain: ${requested}. See GET /v1/chains.`,
          "chain_unknown",
        ),
      );
    const config = configured.find((c) => c.chain === requested);
    if (!config)
      return Effect.fail(
        invalidParam(
          "chain",
          `You have not configured chain ${requested}: set a payout address with POST /v1/merchant/chains first.`,
          "chain_not_configured",
        ),
      );
    return Effect.succeed({ chain, config });
  }
  if (configured.length === 0)
    return Effect.fail(
      invalidParam(
        "chain",
        "You have no chain configured in this mode: set a payout address with POST /v1/merchant/chains first.",
        "chain_not_configured",
      ),
    );
  // Without `chain`: the one configured chain where recurring billing is open.
  const open = configured.filter((c) => registry.find(c.chain, caller.livemode)?.subscriptions_available);
  const [only, ...others] = open.length > 0 ? open : configured;
  if (others.length > 0 || !only)
    return Effect.fail(
      invalidParam(
        "chain",
        `You have configured several chains (${open.map((c) => c.chain).join(", ")}): say which one with \`chain\`.`,
        "parameter_missing",
      ),
    );
  const chain = registry.find(only.chain, caller.livemode);
  return chain
    ? Effect.succeed({ chain, config: only })
    : Effect.fail(invalidParam("chain", `Chain ${only.chain} is no longer offered.`, "chain_unknown"));
};

export const chooseToken = (config: MerchantChainObject, requested: string | undefined) => {
  if (requested !== undefined) {
    const wanted = requested.toLowerCase();
    const token = config.tokens.find(
      (t) => t.symbol.toLowerCase() === wanted || t.address.toLowerCase() === wanted,
    );
    return token
      ? Effect.succeed(token)
      : Effect.fail(
          invalidParam(
            "token",
            `You do not accept ${JSON.stringify(requested.slice(0, 60))} on chain ${config.chain}; you accept ${config.tokens.map((t) => t.symbol).join(", ")}.`,
            "token_unknown",
          ),
        );
  }
  const [only, ...others] = config.tokens;
  if (only && others.length === 0) return Effect.succeed(only);
  return Effect.fail(
    invalidParam(
      "token",
      `You accept several tokens on chain ${config.chain} (${config.tokens.map((t) => t.symbol).join(", ")}): say which one with \`token\`.`,
      "parameter_missing",
    ),
  );
};

export class Mandates extends Context.Service<
  Mandates,
  {
    readonly create: (
      caller: Caller,
      input: CreateMandate,
    ) => Effect.Effect<MandateObject, InvalidRequest | Unavailable | SqlError.SqlError>;
    readonly retrieve: (
      caller: Caller,
      id: string,
    ) => Effect.Effect<MandateObject, NotFound | SqlError.SqlError>;
    readonly list: (
      caller: Caller,
      query: ListMandatesQuery,
    ) => Effect.Effect<
      { object: "list"; data: MandateObject[]; has_more: boolean },
      InvalidRequest | SqlError.SqlError
    >;
    /** The caller's own mandate (charging locks mandates with `lockMany`). */
    readonly load: (caller: Caller, id: string) => Effect.Effect<MandateRow, NotFound | SqlError.SqlError>;
    /**
     * The mandates named, each only for its own caller's merchant and mode, locked for update in id
     * order (so two batches naming the same mandates cannot deadlock). Inside a transaction.
     */
    readonly lockMany: (
      refs: readonly { readonly caller: Caller; readonly mandateId: string }[],
    ) => Effect.Effect<readonly MandateRow[], SqlError.SqlError>;
    readonly byAuthorizationToken: (
      token: string,
    ) => Effect.Effect<MandateRow | undefined, SqlError.SqlError>;
    readonly reload: (id: string) => Effect.Effect<MandateRow, SqlError.SqlError>;
    readonly render: (row: MandateRow) => MandateObject;
  }
>()("Mandates") {
  static readonly layer = Layer.effect(
    Mandates,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const registry = yield* ChainRegistry;
      const merchantChains = yield* MerchantChains;
      const clients = yield* ChainClients;
      const relayer = yield* Relayer;
      const { url: publicUrl } = yield* PublicUrl;

      const render = (row: MandateRow) => toMandateObject(row, registry.byId(row.chain_id), publicUrl);

      const select = (where: string, params: unknown[], suffix = "") =>
        sql
          .unsafe(`SELECT ${MANDATE_COLUMNS} FROM billing.mandates WHERE ${where} ${suffix}`, params)
          .pipe(Effect.flatMap(decodeMandates));

      const load = (caller: Caller, id: string) =>
        select("id = $1 AND merchant_id = $2 AND livemode = $3", [
          id,
          caller.merchantId,
          caller.livemode,
        ]).pipe(Effect.flatMap(firstOr(() => notFoundMandate(id))));

      const reload = (id: string) => select("id = $1", [id]).pipe(Effect.flatMap(theRow(`mandate ${id}`)));

      const lockMany = (refs: readonly { readonly caller: Caller; readonly mandateId: string }[]) =>
        refs.length === 0
          ? Effect.succeed([] as readonly MandateRow[])
          : select(
              "id = ANY($1) AND (id, merchant_id, livemode) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::boolean[]))",
              [
                refs.map((r) => r.mandateId),
                refs.map((r) => r.caller.merchantId),
                refs.map((r) => r.caller.livemode),
              ],
              "ORDER BY id FOR UPDATE",
            );

      const create = (caller: Caller, input: CreateMandate) =>
        Effect.gen(function* () {
          if (input.period !== "month")
            return yield* invalidParam(
              "period",
              `Unsupported period ${JSON.stringify(input.period.slice(0, 40))}: mandates bill per calendar month; use "month".`,
              "period_unsupported",
            );
          const configured = yield* merchantChains.list(caller);
          const { chain, config } = yield* chooseChain(registry, caller, configured, input.chain);
          if (!chain.subscriptions_available)
            return yield* invalidParam(
              "chain",
              `Recurring billing is closed on chain ${chain.id} (${chain.name}): its subscriptions_available is false, so new mandates and subscriptions cannot be opened there. Existing mandates on it keep charging. Choose another chain from GET /v1/chains.`,
              "chain_closed",
            );
          const token = yield* chooseToken(config, input.token);
          const cap = parseDecimal(input.cap_decimal, token.decimals, MAX_CAP_UNITS);
          if (Result.isFailure(cap))
            return yield* invalidParam("cap_decimal", `cap_decimal ${cap.failure.message}.`);
          const operator = relayer.address;
          if (!operator)
            return yield* new Unavailable({
              code: "relayer_unavailable",
              message: "This service has no relayer key configured, so it cannot open mandates.",
            });
          // Period 0 starts now, as the chain tells time (a test clock moves it).
          const anchor = yield* clients
            .latestTime(chain)
            .pipe(
              Effect.mapError(
                (e) =>
                  new Unavailable({ code: "chain_unavailable", message: `Chain ${chain.id}: ${e.message}` }),
              ),
            );
          const id = yield* newId("mandate");
          const salt = BigInt(`0x${randomBytes(12).toString("hex")}`);
          const rows = yield* sql`INSERT INTO billing.mandates ${sql.insert({
            id,
            merchant_id: caller.merchantId,
            livemode: caller.livemode,
            origin: "api",
            chain_id: chain.id,
            token_address: getAddress(token.address),
            cap: cap.success.toString(),
            period: "month",
            approval_periods: input.approval_periods ?? DEFAULT_APPROVAL_PERIODS,
            customer: input.customer,
            reference: input.reference ?? null,
            payee_address: getAddress(config.payout_address),
            operator_address: operator,
            hold_seconds: chain.escrow_available ? chain.hold_seconds : 0,
            anchor,
            salt: salt.toString(),
            authorization_token: randomBytes(24).toString("base64url"),
            status: "pending",
          })} RETURNING ${sql.literal(MANDATE_COLUMNS)}`.pipe(Effect.flatMap(decodeMandates));
          return render(rows[0] as MandateRow);
        });

      const retrieve = (caller: Caller, id: string) => Effect.map(load(caller, id), render);

      const list = (caller: Caller, query: ListMandatesQuery) =>
        Effect.gen(function* () {
          const params: unknown[] = [caller.merchantId, caller.livemode];
          const where = ["merchant_id = $1", "livemode = $2"];
          if (query.customer !== undefined) {
            params.push(query.customer);
            where.push(`customer = $${params.length}`);
          }
          if (query.status !== undefined) {
            params.push(query.status);
            where.push(`status = $${params.length}`);
          }
          if (query.starting_after !== undefined) {
            params.push(query.starting_after);
            where.push(`id < $${params.length}`);
          }
          const limit = query.limit ?? 10;
          const rows = yield* select(where.join(" AND "), params, `ORDER BY id DESC LIMIT ${limit + 1}`);
          return pageOf(rows.map(render), limit);
        });

      const byAuthorizationToken = (token: string) =>
        select("authorization_token = $1", [token]).pipe(Effect.map((rows) => rows[0]));

      return { create, retrieve, list, load, lockMany, byAuthorizationToken, reload, render };
    }),
  );
}
