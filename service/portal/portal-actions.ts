/**
 * What the customer does on the portal, within its session's scope (portal-sessions.ts): cancel a
 * subscription at the end of its period, through the same operation as the API's cancel
 * (`Subscriptions.cancel`, so the same rules and events), recorded as the customer's
 * (`cancellation_source: "portal"`). The link is the customer's credential, as in Stripe's portal: no
 * wallet is needed to stop future charges. And revoke a mandate without gas: the customer's wallet
 * signs the escrow's `Revoke` and the relayer submits it (`Revocations`, mandates/revocations.ts).
 */
import { Context, Effect, Layer } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { type InvalidRequest, invalidParam, type NotFound, resourceMissing } from "../errors.ts";
import {
  type RevocationFailure,
  type RevocationObject,
  type RevocationRequestObject,
  type RevocationSubmission,
  Revocations,
} from "../mandates/revocations.ts";
import { Subscriptions } from "../subscriptions/subscriptions.ts";
import type { PortalAccess } from "./portal-sessions.ts";
import { PortalViews } from "./portal-view.ts";

export class PortalActions extends Context.Service<
  PortalActions,
  {
    /** 404 `resource_missing` for a subscription that is not this customer's (another's, or none). */
    readonly cancelSubscription: (
      access: PortalAccess,
      id: string,
    ) => Effect.Effect<void, NotFound | InvalidRequest | SqlError.SqlError>;
    /** What the customer's wallet signs to revoke its mandate `id`; 404 for a mandate not its own. */
    readonly revocationRequest: (
      access: PortalAccess,
      id: string,
    ) => Effect.Effect<RevocationRequestObject, RevocationFailure>;
    /** Relays the customer's signed revocation of its mandate `id`. */
    readonly revoke: (
      access: PortalAccess,
      id: string,
      input: RevocationSubmission,
    ) => Effect.Effect<RevocationObject, RevocationFailure>;
  }
>()("PortalActions") {
  static readonly layer = Layer.effect(
    PortalActions,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const views = yield* PortalViews;
      const subscriptions = yield* Subscriptions;
      const revocations = yield* Revocations;

      const cancelSubscription = (access: PortalAccess, id: string) =>
        Effect.gen(function* () {
          const row = yield* views.subscriptionOf(access, id);
          if (row === undefined) return yield* resourceMissing("subscription", id);
          if (!access.features.subscription_cancel.enabled)
            return yield* invalidParam(
              "id",
              "This portal link does not allow canceling subscriptions: contact the merchant.",
              "portal_feature_disabled",
            );
          yield* subscriptions.cancel(access.scope, id, { at_period_end: true }, "portal");
        }).pipe(sql.withTransaction);

      const mandateOf = (access: PortalAccess, id: string) =>
        Effect.flatMap(views.mandateOf(access, id), (row) =>
          row === undefined ? Effect.fail(resourceMissing("mandate", id)) : Effect.succeed(row),
        );

      return {
        cancelSubscription,
        revocationRequest: (access: PortalAccess, id: string) =>
          Effect.flatMap(mandateOf(access, id), revocations.request),
        revoke: (access: PortalAccess, id: string, input: RevocationSubmission) =>
          Effect.flatMap(mandateOf(access, id), (mandate) => revocations.submit(mandate, input)),
      };
    }),
  );
}
