/**
 * Subscriptions as merchants open, read and cancel them, and their invoices. Opening a subscription
 * opens its mandate (the customer's on-chain authorisation) in the same transaction; billing then
 * follows the mandate's periods (subscriptions/billing.ts).
 *
 * The mandate's cap is sized by one rule: `cap_decimal` when given (at least the first invoice, the
 * price after its coupon), otherwise the price's monthly amount, undiscounted, so that a discount ending
 * never pushes a charge above it. A price with a metered part needs an explicit `cap_decimal` (the usage it allows).
 */
import { PgClient } from "@effect/sql-pg";
import { Context, Effect, Layer, Result, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import type { Caller } from "../auth/api-keys.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { PublicUrl } from "../config/public-url.ts";
import { decodeRows, firstOr, theRow } from "../db/rows.ts";
import { InvalidRequest, invalidParam, NotFound, type Unavailable } from "../errors.ts";
import { raiseEvent } from "../events/outbox.ts";
import { newId } from "../ids.ts";
import { tokenOf } from "../mandates/mandate-object.ts";
import { Mandates } from "../mandates/mandates.ts";
import { formatDecimal, MAX_CAP_UNITS, parseDecimal } from "../money/decimal.ts";
import { PageQuery, pageOf } from "../pagination.ts";
import { Coupons } from "./coupons.ts";
import { discountOf } from "./invoice-math.ts";
import {
  INVOICE_COLUMNS,
  INVOICE_FROM,
  type InvoiceObject,
  InvoiceRow,
  toInvoiceObject,
} from "./invoice-object.ts";
import { Prices } from "./prices.ts";
import {
  SUBSCRIPTION_COLUMNS,
  SUBSCRIPTION_FROM,
  SUBSCRIPTION_STATUSES,
  type SubscriptionObject,
  SubscriptionRow,
  toSubscriptionObject,
} from "./subscription-object.ts";

export const CreateSubscription = Schema.Struct({
  customer: Schema.String.check(Schema.isBetweenLength(1, 500)).annotate({
    description: "Your reference for the customer",
  }),
  price: Schema.String.annotate({ description: "price_… (active)" }),
  coupon: Schema.optionalKey(
    Schema.String.annotate({ description: "cpn_…: a discount for its duration_in_months" }),
  ),
  cap_decimal: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "The mandate's cap per month, at least the first invoice (the price after the coupon); default: the price's undiscounted amount. Required for a price with a metered part. Below the undiscounted price, discount.ending_above_cap warns a week before the discount ends.",
    }),
  ),
  approval_periods: Schema.optionalKey(
    Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 120 })).annotate({
      description: "Months one signature covers (default 12); the customer re-signs on the same link after",
    }),
  ),
}).annotate({ identifier: "CreateSubscriptionRequest" });
export type CreateSubscription = typeof CreateSubscription.Type;

export const CancelSubscription = Schema.Struct({
  at_period_end: Schema.optionalKey(
    Schema.Boolean.annotate({ description: "true: bill no further period, end at the current one's end" }),
  ),
}).annotate({ identifier: "CancelSubscriptionRequest" });

export const ListSubscriptionsQuery = Schema.Struct({
  ...PageQuery.fields,
  customer: Schema.optionalKey(Schema.String),
  status: Schema.optionalKey(Schema.Literals(SUBSCRIPTION_STATUSES)),
}).annotate({ identifier: "ListSubscriptionsQuery" });
export type ListSubscriptionsQuery = typeof ListSubscriptionsQuery.Type;

export const ListInvoicesQuery = Schema.Struct({
  ...PageQuery.fields,
  subscription: Schema.optionalKey(Schema.String),
}).annotate({ identifier: "ListInvoicesQuery" });
export type ListInvoicesQuery = typeof ListInvoicesQuery.Type;

const decodeSubscriptions = decodeRows(SubscriptionRow);
const decodeInvoices = decodeRows(InvoiceRow);

const notFound = (kind: string, id: string) =>
  new NotFound({ code: "resource_missing", message: `No such ${kind}: '${id.slice(0, 80)}'`, param: "id" });
export const notFoundSubscription = (id: string) => notFound("subscription", id);
export const notFoundInvoice = (id: string) => notFound("invoice", id);

/** A referenced object that does not exist is the request's mistake: 400 naming the parameter. */
const missingReference = <A, R>(param: string, effect: Effect.Effect<A, NotFound | SqlError.SqlError, R>) =>
  effect.pipe(
    Effect.catchTag("NotFound", (error) =>
      Effect.fail(new InvalidRequest({ code: "resource_missing", message: error.message, param })),
    ),
  );

type List<A> = { object: "list"; data: A[]; has_more: boolean };

export class Subscriptions extends Context.Service<
  Subscriptions,
  {
    readonly create: (
      caller: Caller,
      input: CreateSubscription,
    ) => Effect.Effect<SubscriptionObject, InvalidRequest | Unavailable | SqlError.SqlError>;
    readonly retrieve: (
      caller: Caller,
      id: string,
    ) => Effect.Effect<SubscriptionObject, NotFound | SqlError.SqlError>;
    readonly list: (
      caller: Caller,
      query: ListSubscriptionsQuery,
    ) => Effect.Effect<List<SubscriptionObject>, SqlError.SqlError>;
    readonly cancel: (
      caller: Caller,
      id: string,
      input: typeof CancelSubscription.Type,
    ) => Effect.Effect<SubscriptionObject, NotFound | InvalidRequest | SqlError.SqlError>;
    readonly retrieveInvoice: (
      caller: Caller,
      id: string,
    ) => Effect.Effect<InvoiceObject, NotFound | SqlError.SqlError>;
    readonly listInvoices: (
      caller: Caller,
      query: ListInvoicesQuery,
    ) => Effect.Effect<List<InvoiceObject>, SqlError.SqlError>;
    /** The record with its mandate's terms; locked for update when asked (inside a transaction). */
    readonly load: (
      caller: Caller,
      id: string,
      forUpdate?: boolean,
    ) => Effect.Effect<SubscriptionRow, NotFound | SqlError.SqlError>;
    readonly reload: (id: string) => Effect.Effect<SubscriptionRow, SqlError.SqlError>;
    /**
     * The rows among `ids` still matching `condition` (on `s`; placeholders from $2, filled by
     * `params`), locked in id order; rows another transaction holds are skipped. Inside a transaction.
     */
    readonly lockWhere: (
      ids: readonly string[],
      condition: string,
      params?: readonly unknown[],
    ) => Effect.Effect<readonly SubscriptionRow[], SqlError.SqlError>;
    readonly reloadInvoice: (id: string) => Effect.Effect<InvoiceRow, SqlError.SqlError>;
    readonly reloadInvoices: (
      ids: readonly string[],
    ) => Effect.Effect<readonly InvoiceRow[], SqlError.SqlError>;
    readonly render: (row: SubscriptionRow) => SubscriptionObject;
    /** Ends a subscription for good: open invoices are voided and `subscription.canceled` is raised. */
    readonly endSubscription: (
      id: string,
      reason: "requested" | "payment_failed" | "mandate_revoked",
    ) => Effect.Effect<void, SqlError.SqlError>;
    readonly renderInvoice: (row: InvoiceRow) => InvoiceObject;
  }
>()("Subscriptions") {
  static readonly layer = Layer.effect(
    Subscriptions,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const pg = yield* PgClient.PgClient;
      const registry = yield* ChainRegistry;
      const mandates = yield* Mandates;
      const prices = yield* Prices;
      const coupons = yield* Coupons;
      const { url: publicUrl } = yield* PublicUrl;
      const render = (row: SubscriptionRow) =>
        toSubscriptionObject(row, registry.byId(row.chain_id), publicUrl);
      const renderInvoice = (row: InvoiceRow) => toInvoiceObject(row, registry.byId(row.chain_id));

      const select = (where: string, params: unknown[], suffix = "") =>
        sql
          .unsafe(`SELECT ${SUBSCRIPTION_COLUMNS} FROM ${SUBSCRIPTION_FROM} WHERE ${where} ${suffix}`, params)
          .pipe(Effect.flatMap(decodeSubscriptions));
      const selectInvoices = (where: string, params: unknown[], suffix = "") =>
        sql
          .unsafe(`SELECT ${INVOICE_COLUMNS} FROM ${INVOICE_FROM} WHERE ${where} ${suffix}`, params)
          .pipe(Effect.flatMap(decodeInvoices));

      const load = (caller: Caller, id: string, forUpdate = false) =>
        select(
          "s.id = $1 AND s.merchant_id = $2 AND s.livemode = $3",
          [id, caller.merchantId, caller.livemode],
          forUpdate ? "FOR UPDATE OF s" : "",
        ).pipe(Effect.flatMap(firstOr(() => notFound("subscription", id))));
      const reload = (id: string) =>
        select("s.id = $1", [id]).pipe(Effect.flatMap(theRow(`subscription ${id}`)));
      const reloadInvoices = (ids: readonly string[]) => selectInvoices("i.id = ANY($1)", [ids]);
      const lockWhere = (ids: readonly string[], condition: string, params: readonly unknown[] = []) =>
        ids.length === 0
          ? Effect.succeed([] as readonly SubscriptionRow[])
          : select(
              `s.id = ANY($1) AND ${condition}`,
              [ids, ...params],
              "ORDER BY s.id FOR UPDATE OF s SKIP LOCKED",
            );

      const reloadInvoice = (id: string) =>
        selectInvoices("i.id = $1", [id]).pipe(Effect.flatMap(theRow(`invoice ${id}`)));

      const create = (caller: Caller, input: CreateSubscription) =>
        Effect.gen(function* () {
          const price = yield* missingReference("price", prices.load(caller, input.price));
          if (!price.active)
            return yield* invalidParam(
              "price",
              `Price ${price.id} is deactivated: it takes no new subscriptions (existing ones keep billing).`,
              "price_inactive",
            );
          const chain = registry.byId(price.chain_id);
          const token = tokenOf(chain, price.token_address);
          if (!chain || !token)
            return yield* invalidParam(
              "price",
              `Price ${price.id} is on a chain no longer offered.`,
              "chain_unknown",
            );
          if (!chain.subscriptions_available)
            return yield* invalidParam(
              "price",
              `Recurring billing is closed on chain ${chain.id} (${chain.name}), the chain of price ${price.id}: its subscriptions_available is false, so new subscriptions and mandates cannot be opened there. Existing subscriptions on it keep billing. Use a price on another chain from GET /v1/chains.`,
              "chain_closed",
            );
          const coupon =
            input.coupon === undefined
              ? undefined
              : yield* missingReference("coupon", coupons.load(caller, input.coupon));
          let amountOff: bigint | null = null;
          if (coupon?.amount_off_decimal != null) {
            if (coupon.token_symbol?.toLowerCase() !== token.symbol.toLowerCase())
              return yield* invalidParam(
                "coupon",
                `Coupon ${coupon.id} takes ${coupon.amount_off_decimal} ${coupon.token_symbol} off; price ${price.id} is in ${token.symbol}.`,
                "coupon_not_applicable",
              );
            const off = parseDecimal(coupon.amount_off_decimal, token.decimals, MAX_CAP_UNITS);
            if (Result.isFailure(off))
              return yield* invalidParam(
                "coupon",
                `Coupon ${coupon.id}'s amount ${off.failure.message}.`,
                "coupon_not_applicable",
              );
            amountOff = off.success;
          }
          const amount = BigInt(price.amount);
          // The first invoice's fixed part: the least a cap can be and still collect anything.
          const firstInvoice =
            coupon === undefined
              ? amount
              : amount -
                discountOf({ coupon: coupon.id, percentOffBps: coupon.percent_off_bps, amountOff }, amount);
          let cap = amount;
          if (input.cap_decimal !== undefined) {
            const parsed = parseDecimal(input.cap_decimal, token.decimals, MAX_CAP_UNITS);
            if (Result.isFailure(parsed))
              return yield* invalidParam("cap_decimal", `cap_decimal ${parsed.failure.message}.`);
            if (parsed.success < firstInvoice || parsed.success === 0n)
              return yield* invalidParam(
                "cap_decimal",
                `cap_decimal ${input.cap_decimal} is below the first invoice's ${formatDecimal(firstInvoice, token.decimals)} ${token.symbol}: it could not be collected.`,
                "cap_too_low",
              );
            cap = parsed.success;
          } else if (price.usage_unit_amount !== null)
            return yield* invalidParam(
              "cap_decimal",
              `Price ${price.id} has a metered part: say with cap_decimal how much a month the customer authorises.`,
              "parameter_missing",
            );
          const id = yield* newId("subscription");
          const mandate = yield* mandates.create(caller, {
            cap_decimal: formatDecimal(cap, token.decimals),
            period: "month",
            customer: input.customer,
            reference: id,
            chain: chain.id,
            token: token.address,
            ...(input.approval_periods === undefined ? {} : { approval_periods: input.approval_periods }),
          });
          yield* sql`INSERT INTO billing.subscriptions ${sql.insert({
            id,
            merchant_id: caller.merchantId,
            livemode: caller.livemode,
            customer: input.customer,
            price_id: price.id,
            mandate_id: mandate.id,
            chain_id: chain.id,
            coupon_id: coupon?.id ?? null,
            status: "incomplete",
          })}`;
          return render(yield* reload(id));
        });

      const retrieve = (caller: Caller, id: string) => Effect.map(load(caller, id), render);

      const list = (caller: Caller, query: ListSubscriptionsQuery) =>
        Effect.gen(function* () {
          const params: unknown[] = [caller.merchantId, caller.livemode];
          const where = ["s.merchant_id = $1", "s.livemode = $2"];
          if (query.customer !== undefined) {
            params.push(query.customer);
            where.push(`s.customer = $${params.length}`);
          }
          if (query.status !== undefined) {
            params.push(query.status);
            where.push(`s.status = $${params.length}`);
          }
          if (query.starting_after !== undefined) {
            params.push(query.starting_after);
            where.push(`s.id < $${params.length}`);
          }
          const limit = query.limit ?? 10;
          const rows = yield* select(where.join(" AND "), params, `ORDER BY s.id DESC LIMIT ${limit + 1}`);
          return pageOf(rows.map(render), limit);
        });

      const cancel = (caller: Caller, id: string, input: typeof CancelSubscription.Type) =>
        Effect.gen(function* () {
          const row = yield* load(caller, id, true);
          if (row.status === "canceled")
            return yield* new InvalidRequest({
              code: "subscription_canceled",
              message: `Subscription ${id} is already canceled.`,
              param: null,
            });
          if (input.at_period_end === true && row.status !== "incomplete") {
            yield* sql`UPDATE billing.subscriptions SET cancel_at_period_end = true, updated_at = now() WHERE id = ${id}`;
            return render(yield* reload(id));
          }
          yield* endSubscription(id, "requested");
          return render(yield* reload(id));
        });

      const endSubscription = (id: string, reason: "requested" | "payment_failed" | "mandate_revoked") =>
        Effect.gen(function* () {
          yield* sql`UPDATE billing.subscriptions SET status = 'canceled', canceled_at = now(),
              cancellation_reason = ${reason}, next_billing_at = NULL, updated_at = now() WHERE id = ${id}`;
          yield* sql`UPDATE billing.invoices SET status = 'void', next_attempt_at = NULL, updated_at = now()
            WHERE subscription_id = ${id} AND status = 'open'`;
          const row = yield* reload(id);
          yield* raiseEvent({
            merchantId: row.merchant_id,
            livemode: row.livemode,
            type: "subscription.canceled",
            object: render(row),
            key: `${id}:canceled`,
          }).pipe(Effect.provideService(PgClient.PgClient, pg));
        });

      const retrieveInvoice = (caller: Caller, id: string) =>
        selectInvoices("i.id = $1 AND i.merchant_id = $2 AND i.livemode = $3", [
          id,
          caller.merchantId,
          caller.livemode,
        ]).pipe(
          Effect.flatMap((rows) =>
            rows[0] ? Effect.succeed(renderInvoice(rows[0])) : Effect.fail(notFound("invoice", id)),
          ),
        );

      const listInvoices = (caller: Caller, query: ListInvoicesQuery) =>
        Effect.gen(function* () {
          const params: unknown[] = [caller.merchantId, caller.livemode];
          const where = ["i.merchant_id = $1", "i.livemode = $2"];
          if (query.subscription !== undefined) {
            params.push(query.subscription);
            where.push(`i.subscription_id = $${params.length}`);
          }
          if (query.starting_after !== undefined) {
            params.push(query.starting_after);
            where.push(`i.id < $${params.length}`);
          }
          const limit = query.limit ?? 10;
          const rows = yield* selectInvoices(
            where.join(" AND "),
            params,
            `ORDER BY i.id DESC LIMIT ${limit + 1}`,
          );
          return pageOf(rows.map(renderInvoice), limit);
        });

      return {
        create,
        load,
        retrieve,
        list,
        cancel,
        retrieveInvoice,
        listInvoices,
        reload,
        lockWhere,
        reloadInvoice,
        reloadInvoices,
        render,
        renderInvoice,
        endSubscription,
      };
    }),
  );
}
