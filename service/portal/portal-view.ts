/**
 * What the customer portal shows one customer (portal-sessions.ts, `PortalAccess`): its mandates and
 * subscriptions with the session's merchant, in the session's mode, newest first (at most 100 of each):
 * amounts, caps, the next charge (drafted by the same code billing uses, upcoming-charge.ts), holds
 * and the latest charges. Revoked mandates and canceled subscriptions are left out: nothing is left to
 * manage there. Every read names the session's scope and customer; nothing else is reachable.
 */
import { Context, Effect, Layer, Schema } from "effect";
import type { SqlError } from "effect/sql";
import { periodStart } from "../../src/ledger/period.ts";
import { tokenOf } from "../chains/config.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { CHARGE_STATUSES, type ChargeRow, FAILURE_CODES } from "../charges/charge-object.ts";
import { ChargeStore } from "../charges/charge-store.ts";
import { PublicUrl } from "../config/public-url.ts";
import type { Page } from "../db/query.ts";
import type { InvalidRequest, Unavailable } from "../errors.ts";
import {
  chainOfMandate,
  needsSignature,
  WalletChain,
  walletChainOf,
} from "../mandates/authorization-session.ts";
import { authorizationUrl, MANDATE_STATUSES, type MandateRow } from "../mandates/mandate-object.ts";
import { MandateStore } from "../mandates/mandate-store.ts";
import { Merchants } from "../merchants/merchants.ts";
import { formatDecimal } from "../money/decimal.ts";
import { InvoiceDrafts } from "../subscriptions/invoice-draft.ts";
import { Prices } from "../subscriptions/prices.ts";
import { SUBSCRIPTION_STATUSES, type SubscriptionRow } from "../subscriptions/subscription-object.ts";
import { SubscriptionStore } from "../subscriptions/subscription-store.ts";
import { Subscriptions } from "../subscriptions/subscriptions.ts";
import { draftUpcomingCharge } from "../subscriptions/upcoming-charge.ts";
import { type PortalAccess, PortalFeaturesObject } from "./portal-sessions.ts";

/** At most this many mandates and subscriptions are shown, newest first. */
export const PORTAL_LIST_LIMIT = 100;
/** The latest charges shown per mandate. */
export const PORTAL_RECENT_CHARGES = 5;
/** The latest charges read per mandate, whose held ones are shown as holds. */
const CHARGES_READ = 10;

const Decimal = Schema.String;

const PortalCharge = Schema.Struct({
  id: Schema.String,
  status: Schema.Literals(CHARGE_STATUSES),
  amount_decimal: Decimal,
  period: Schema.Int,
  failure_code: Schema.NullOr(Schema.Literals(FAILURE_CODES)),
  /** Chain time of the charge (unix seconds); null while pending or failed before the chain. */
  charged_at: Schema.NullOr(Schema.Int),
  created: Schema.Int,
});

const PortalHold = Schema.Struct({
  charge: Schema.String,
  amount_decimal: Decimal,
  release_at: Schema.Int,
});

export const PortalMandate = Schema.Struct({
  id: Schema.String,
  status: Schema.Literals(MANDATE_STATUSES),
  chain: WalletChain,
  token: Schema.Struct({ symbol: Schema.String, decimals: Schema.Int }),
  cap_decimal: Decimal,
  period: Schema.Literal("month"),
  approval_left_decimal: Schema.NullOr(Decimal),
  hold_seconds: Schema.Int,
  customer_address: Schema.NullOr(Schema.String),
  /** Something waits for the customer's signature there (the first one, a renewal). */
  signature_wanted: Schema.Boolean,
  authorization_url: Schema.String,
  /** The customer can revoke it here, without gas (signed on chain, not revoked, the deployment relays it). */
  revocable: Schema.Boolean,
  /** The subscription that charges this mandate, if any. */
  subscription: Schema.NullOr(Schema.String),
  holds: Schema.Array(PortalHold),
  recent_charges: Schema.Array(PortalCharge),
});
export type PortalMandate = typeof PortalMandate.Type;

export const PortalSubscription = Schema.Struct({
  id: Schema.String,
  status: Schema.Literals(SUBSCRIPTION_STATUSES),
  mandate: Schema.String,
  product_name: Schema.String,
  amount_decimal: Decimal,
  token: Schema.String,
  cap_decimal: Decimal,
  current_period: Schema.NullOr(Schema.Struct({ start: Schema.Int, end: Schema.Int })),
  next_charge: Schema.NullOr(Schema.Struct({ at: Schema.Int, amount_decimal: Decimal })),
  cancel_at_period_end: Schema.Boolean,
  /** When it ends, if set to end at its period's end (chain time). */
  ends_at: Schema.NullOr(Schema.Int),
  /** The customer may cancel it here (the session allows it, and it is not already ending). */
  cancelable: Schema.Boolean,
});
export type PortalSubscription = typeof PortalSubscription.Type;

export const PortalViewObject = Schema.Struct({
  object: Schema.Literal("portal"),
  livemode: Schema.Boolean,
  customer: Schema.String,
  merchant: Schema.Struct({ name: Schema.String }),
  return_url: Schema.NullOr(Schema.String),
  expires_at: Schema.Int,
  features: PortalFeaturesObject,
  mandates: Schema.Array(PortalMandate),
  subscriptions: Schema.Array(PortalSubscription),
}).annotate({ identifier: "PortalView" });
export type PortalView = typeof PortalViewObject.Type;

const seconds = (date: Date) => Math.floor(date.getTime() / 1000);

const chargeOf = (row: ChargeRow, decimals: number) => ({
  id: row.id,
  status: row.status,
  amount_decimal: formatDecimal(BigInt(row.amount), decimals),
  period: row.period,
  failure_code: row.failure_code,
  charged_at: row.charged_at,
  created: seconds(row.created_at),
});

/** Succeeded and waiting for its release: the money is in escrow, not yet the merchant's. */
const isHeld = (row: ChargeRow) =>
  row.status === "succeeded" && row.release_at !== null && row.release_at > 0;

export class PortalViews extends Context.Service<
  PortalViews,
  {
    readonly view: (access: PortalAccess) => Effect.Effect<PortalView, Unavailable | SqlError.SqlError>;
    /** The customer's subscription `id`, or undefined when it is not one (another customer's, say). */
    readonly subscriptionOf: (
      access: PortalAccess,
      id: string,
    ) => Effect.Effect<SubscriptionRow | undefined, SqlError.SqlError>;
    /** The customer's mandate `id`, or undefined when it is not one. */
    readonly mandateOf: (
      access: PortalAccess,
      id: string,
    ) => Effect.Effect<MandateRow | undefined, SqlError.SqlError>;
  }
>()("PortalViews") {
  static readonly layer = Layer.effect(
    PortalViews,
    Effect.gen(function* () {
      const registry = yield* ChainRegistry;
      const mandates = yield* MandateStore;
      const subscriptionStore = yield* SubscriptionStore;
      const subscriptions = yield* Subscriptions;
      const charges = yield* ChargeStore;
      const prices = yield* Prices;
      const merchants = yield* Merchants;
      const drafts = yield* InvoiceDrafts;
      const { url: publicUrl } = yield* PublicUrl;
      const page = { limit: PORTAL_LIST_LIMIT };
      // The page gives no cursors, so the listings cannot refuse conflicting ones.
      const listed = <A, R>(effect: Effect.Effect<Page<A>, InvalidRequest | SqlError.SqlError, R>) =>
        effect.pipe(
          Effect.map((result) => result.data),
          Effect.catchTag("InvalidRequest", Effect.die),
        );

      const mandateView = (access: PortalAccess, row: MandateRow, subscription: string | null) =>
        Effect.gen(function* () {
          const chain = yield* chainOfMandate(registry, row);
          const decimals = tokenOf(chain, row.token_address)?.decimals ?? 0;
          const latest = yield* listed(charges.pageForMandate(row.id, { limit: CHARGES_READ }));
          const decimal = (units: string) => formatDecimal(BigInt(units), decimals);
          return {
            id: row.id,
            status: row.status,
            chain: walletChainOf(chain),
            token: { symbol: tokenOf(chain, row.token_address)?.symbol ?? row.token_address, decimals },
            cap_decimal: decimal(row.cap),
            period: "month" as const,
            approval_left_decimal: row.approval_left === null ? null : decimal(row.approval_left),
            hold_seconds: row.hold_seconds,
            customer_address: row.customer_address,
            signature_wanted: needsSignature(row),
            authorization_url: authorizationUrl(publicUrl, row.authorization_token),
            revocable:
              access.features.mandate_revoke.enabled &&
              row.onchain_id !== null &&
              row.customer_address !== null,
            subscription,
            holds: latest.filter(isHeld).map((charge) => ({
              charge: charge.id,
              amount_decimal: decimal(charge.amount),
              release_at: charge.release_at ?? 0,
            })),
            recent_charges: latest
              .slice(0, PORTAL_RECENT_CHARGES)
              .map((charge) => chargeOf(charge, decimals)),
          };
        });

      const subscriptionView = (access: PortalAccess, row: SubscriptionRow) =>
        Effect.gen(function* () {
          const chain = registry.byId(row.chain_id);
          const price = yield* prices.byId(row.price_id);
          const rendered = subscriptions.render(row);
          const decimals = tokenOf(chain, row.token_address)?.decimals ?? 0;
          const billing = row.status === "active" || row.status === "past_due";
          const nextPeriod = row.current_period === null ? null : row.current_period + 1;
          const next =
            chain !== undefined && billing && !row.cancel_at_period_end && nextPeriod !== null
              ? yield* draftUpcomingCharge({
                  chain,
                  subscription: row,
                  rendered,
                  price,
                  period: nextPeriod,
                }).pipe(Effect.provideService(InvoiceDrafts, drafts))
              : null;
          return {
            id: row.id,
            status: row.status,
            mandate: row.mandate_id,
            product_name: price.product_name,
            amount_decimal: formatDecimal(BigInt(price.amount), decimals),
            token: rendered.token,
            cap_decimal: rendered.cap_decimal,
            current_period:
              rendered.current_period === null
                ? null
                : { start: rendered.current_period.start, end: rendered.current_period.end },
            next_charge:
              next === null
                ? null
                : { at: next.object.charge_at, amount_decimal: next.object.amount_decimal },
            cancel_at_period_end: row.cancel_at_period_end,
            ends_at:
              row.cancel_at_period_end && nextPeriod !== null ? periodStart(row.anchor, nextPeriod) : null,
            cancelable: access.features.subscription_cancel.enabled && !row.cancel_at_period_end,
          };
        });

      const view = (access: PortalAccess) =>
        Effect.gen(function* () {
          const { scope, customer } = access;
          const subscriptionRows = (yield* listed(subscriptionStore.page(scope, { customer }, page))).filter(
            (row) => row.status !== "canceled",
          );
          const subscriptionOfMandate = new Map(subscriptionRows.map((row) => [row.mandate_id, row.id]));
          const mandateRows = (yield* listed(mandates.page(scope, { customer }, page))).filter(
            (row) => row.status !== "revoked",
          );
          const merchant = yield* merchants.byId(scope.merchantId);
          return {
            object: "portal" as const,
            livemode: scope.livemode,
            customer,
            merchant: { name: merchant?.name ?? "" },
            return_url: access.returnUrl,
            expires_at: access.expiresAt,
            features: access.features,
            mandates: yield* Effect.forEach(
              mandateRows,
              (row) => mandateView(access, row, subscriptionOfMandate.get(row.id) ?? null),
              { concurrency: 4 },
            ),
            subscriptions: yield* Effect.forEach(subscriptionRows, (row) => subscriptionView(access, row), {
              concurrency: 4,
            }),
          };
        });

      const subscriptionOf = (access: PortalAccess, id: string) =>
        subscriptionStore.load(access.scope, id).pipe(
          Effect.map((row) => (row.customer === access.customer ? row : undefined)),
          Effect.catchTag("NotFound", () => Effect.succeed(undefined)),
        );
      const mandateOf = (access: PortalAccess, id: string) =>
        mandates.load(access.scope, id).pipe(
          Effect.map((row) => (row.customer === access.customer ? row : undefined)),
          Effect.catchTag("NotFound", () => Effect.succeed(undefined)),
        );

      return { view, subscriptionOf, mandateOf };
    }),
  );
}
