/**
 * Customer portal sessions: `POST /v1/portal_sessions` gives a merchant a short-lived link to a hosted
 * page where one customer (the merchant's reference, as on mandates and subscriptions) sees and manages
 * what it signed with this merchant, in one mode. The link's token is 24 random bytes; only its SHA-256
 * is stored, and the URL is shown once (as Stripe's `billing_portal.session`, which has no retrieve).
 * Everything the page reads or changes is scoped to the session's (merchant, livemode, customer):
 * `access` turns a token into that scope, and the views and actions take only it (portal-view.ts,
 * portal-actions.ts): another customer's or merchant's object answers as a missing one. Expiry
 * (PORTAL_SESSION_SECONDS) is decided on Effect's Clock, so the domain test drives it with `TestClock`.
 */
import { createHash, randomBytes } from "node:crypto";
import { Clock, Context, Effect, Layer, Schema } from "effect";
import type { SqlError } from "effect/sql";
import { PublicUrl } from "../config/public-url.ts";
import { type InvalidRequest, invalidParam, NotFound } from "../errors.ts";
import { newId } from "../ids.ts";
import { MandateStore } from "../mandates/mandate-store.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { type PortalSessionRow, PortalSessionStore } from "./portal-session-store.ts";
import { checkReturnUrl } from "./return-url.ts";

/** How long a portal link works after it was created. */
export const PORTAL_SESSION_SECONDS = 3600;

/** A portal link's token: 24 random bytes in base64url (32 characters; 20-80 accepted, as the other pages). */
export const PORTAL_TOKEN_PATTERN = /^[A-Za-z0-9_-]{20,80}$/;

export const notFoundPortal = new NotFound({
  code: "portal_session_not_found",
  message: "This portal link is not valid. Return to the merchant's site and open the portal again.",
  param: null,
});

export const expiredPortal = new NotFound({
  code: "portal_session_expired",
  message: `This portal link has expired (links work for ${PORTAL_SESSION_SECONDS / 60} minutes). Return to the merchant's site and open the portal again.`,
  param: null,
});

const Features = Schema.Struct({
  subscription_cancel: Schema.optionalKey(
    Schema.Struct({
      enabled: Schema.Boolean.annotate({
        description: "The customer may cancel subscriptions at the end of their period (default true)",
      }),
    }),
  ),
}).annotate({ identifier: "PortalFeatures" });

export const CreatePortalSession = Schema.Struct({
  customer: Schema.String.check(Schema.isBetweenLength(1, 500)).annotate({
    description: "Your reference for the customer, as given on its mandates and subscriptions",
  }),
  return_url: Schema.optionalKey(
    Schema.String.annotate({
      description:
        "Where the page's Return link leads (your site): https, or http to a loopback address in test mode",
    }),
  ),
  features: Schema.optionalKey(Features),
}).annotate({ identifier: "CreatePortalSessionRequest" });
export type CreatePortalSession = typeof CreatePortalSession.Type;

export const PortalFeaturesObject = Schema.Struct({
  subscription_cancel: Schema.Struct({ enabled: Schema.Boolean }),
  mandate_revoke: Schema.Struct({ enabled: Schema.Boolean }).annotate({
    description:
      "Revoking a mandate without gas: always on (revoking is the customer's right on chain; the portal spares it the gas)",
  }),
}).annotate({ identifier: "PortalFeaturesObject" });

export const PortalSessionObject = Schema.Struct({
  id: Schema.String.annotate({ description: "bps_…" }),
  object: Schema.Literal("portal_session"),
  livemode: Schema.Boolean,
  customer: Schema.String,
  url: Schema.String.annotate({
    description: "The customer's link to the portal; shown only in this response. Works until expires_at",
  }),
  return_url: Schema.NullOr(Schema.String),
  features: PortalFeaturesObject,
  expires_at: Schema.Int.annotate({ description: "Unix seconds: the link is refused from then on" }),
  created: Schema.Int,
}).annotate({ identifier: "PortalSession" });
export type PortalSessionObject = typeof PortalSessionObject.Type;

/** What a valid portal link grants: one customer's objects in one merchant's scope. */
export interface PortalAccess {
  readonly session: string;
  readonly scope: MerchantScope;
  readonly customer: string;
  readonly returnUrl: string | null;
  readonly features: typeof PortalFeaturesObject.Type;
  /** Unix seconds. */
  readonly expiresAt: number;
}

export const portalUrl = (publicUrl: string, token: string) => `${publicUrl}/portal/${token}`;

const hashToken = (token: string) => createHash("sha256").update(token).digest("hex");

const seconds = (date: Date) => Math.floor(date.getTime() / 1000);

const featuresOf = (row: PortalSessionRow) => ({
  subscription_cancel: { enabled: row.subscription_cancel },
  mandate_revoke: { enabled: true },
});

/** The access a session row grants at `nowMillis` (Effect's Clock): the expired one is refused. */
export const accessOf = (row: PortalSessionRow, nowMillis: number): PortalAccess | NotFound =>
  row.expires_at.getTime() <= nowMillis
    ? expiredPortal
    : {
        session: row.id,
        scope: { merchantId: row.merchant_id, livemode: row.livemode },
        customer: row.customer,
        returnUrl: row.return_url,
        features: featuresOf(row),
        expiresAt: seconds(row.expires_at),
      };

export class PortalSessions extends Context.Service<
  PortalSessions,
  {
    readonly create: (
      scope: MerchantScope,
      input: CreatePortalSession,
    ) => Effect.Effect<PortalSessionObject, InvalidRequest | SqlError.SqlError>;
    /** The access a link's token grants; 404 `portal_session_not_found` or `portal_session_expired`. */
    readonly access: (token: string) => Effect.Effect<PortalAccess, NotFound | SqlError.SqlError>;
  }
>()("PortalSessions") {
  static readonly layer = Layer.effect(
    PortalSessions,
    Effect.gen(function* () {
      const store = yield* PortalSessionStore;
      const mandates = yield* MandateStore;
      const { url: publicUrl } = yield* PublicUrl;

      const create = (scope: MerchantScope, input: CreatePortalSession) =>
        Effect.gen(function* () {
          const returnUrl =
            input.return_url === undefined ? null : yield* checkReturnUrl(input.return_url, scope.livemode);
          // Every subscription has its mandate: a customer without one has nothing to show, and is
          // most likely a mistyped reference.
          const known = yield* mandates
            .page(scope, { customer: input.customer }, { limit: 1 })
            .pipe(Effect.catchTag("InvalidRequest", Effect.die));
          if (known.data.length === 0)
            return yield* invalidParam(
              "customer",
              `No mandate or subscription of yours names customer '${input.customer.slice(0, 80)}' (in ${scope.livemode ? "live" : "test"} mode).`,
              "resource_missing",
            );
          const token = randomBytes(24).toString("base64url");
          const now = yield* Clock.currentTimeMillis;
          const row = yield* store.insert({
            id: yield* newId("portalSession"),
            scope,
            customer: input.customer,
            tokenHash: hashToken(token),
            returnUrl,
            subscriptionCancel: input.features?.subscription_cancel?.enabled ?? true,
            createdAt: new Date(now),
            expiresAt: new Date(now + PORTAL_SESSION_SECONDS * 1000),
          });
          return {
            id: row.id,
            object: "portal_session" as const,
            livemode: row.livemode,
            customer: row.customer,
            url: portalUrl(publicUrl, token),
            return_url: row.return_url,
            features: featuresOf(row),
            expires_at: seconds(row.expires_at),
            created: seconds(row.created_at),
          };
        });

      const access = (token: string) =>
        Effect.gen(function* () {
          if (!PORTAL_TOKEN_PATTERN.test(token)) return yield* notFoundPortal;
          const row = yield* store.byTokenHash(hashToken(token));
          if (row === undefined) return yield* notFoundPortal;
          const granted = accessOf(row, yield* Clock.currentTimeMillis);
          return granted instanceof NotFound ? yield* granted : granted;
        });

      return { create, access };
    }),
  );
}
