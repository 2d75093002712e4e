/** The customer portal: the merchant's `POST /v1/portal_sessions` and the hosted page's API (docs/portal.md). */
import { Effect } from "effect";
import { invalidParam } from "../../errors.ts";
import {
  RevocationObject,
  RevocationRequestObject,
  RevocationSubmission,
} from "../../mandates/revocations.ts";
import { PortalActions } from "../../portal/portal-actions.ts";
import { CreatePortalSession, PortalSessionObject, PortalSessions } from "../../portal/portal-sessions.ts";
import { PortalViewObject, PortalViews } from "../../portal/portal-view.ts";
import { createPortalSession, portalSession } from "../examples/portal.ts";
import { mandateIdParam, portalTokenParam, subscriptionIdParam } from "../path-params.ts";
import { definePublicRoute, defineRoute } from "../route.ts";

export const portalSessionRoutes = [
  defineRoute({
    method: "POST",
    path: "/v1/portal_sessions",
    operationId: "createPortalSession",
    tag: "Customer portal",
    summary: "Create a portal session",
    description:
      "A link to the customer portal for one of your customers, valid for an hour. The customer (your reference, as on its mandates and subscriptions) sees there its mandates and subscriptions with you, in this key's mode: amounts, caps, the next charge, holds and recent charges. It can cancel a subscription at the end of its period (unless `features.subscription_cancel.enabled` is false), open a mandate's authorization page to sign what waits for its signature, and revoke a mandate without gas. The `url` is shown once; send the customer to it right away. A customer no mandate names: 400 `resource_missing` (param `customer`).",
    body: CreatePortalSession,
    response: PortalSessionObject,
    transactional: true,
    examples: {
      request: createPortalSession,
      response: portalSession,
      errors: [
        invalidParam(
          "customer",
          "No mandate or subscription of yours names customer 'cus_9999' (in test mode).",
          "resource_missing",
        ),
      ],
    },
    handler: ({ caller, body }) =>
      Effect.flatMap(Effect.service(PortalSessions), (sessions) => sessions.create(caller, body)),
  }),
];

const accessOf = (token: string) => Effect.flatMap(Effect.service(PortalSessions), (s) => s.access(token));

/** The hosted portal page's own API (docs/portal.md): no API key, the link is the credential. */
export const portalPageRoutes = [
  definePublicRoute({
    method: "GET",
    path: "/portal/{token}/session",
    params: { token: portalTokenParam },
    response: PortalViewObject,
    handler: ({ params }) =>
      Effect.gen(function* () {
        const access = yield* accessOf(params.token ?? "");
        return yield* (yield* PortalViews).view(access);
      }),
  }),
  definePublicRoute({
    method: "POST",
    path: "/portal/{token}/subscriptions/{id}/cancel",
    params: { token: portalTokenParam, id: subscriptionIdParam },
    response: PortalViewObject,
    handler: ({ params }) =>
      Effect.gen(function* () {
        const access = yield* accessOf(params.token ?? "");
        yield* (yield* PortalActions).cancelSubscription(access, params.id ?? "");
        return yield* (yield* PortalViews).view(access);
      }),
  }),
  definePublicRoute({
    method: "GET",
    path: "/portal/{token}/mandates/{id}/revocation",
    params: { token: portalTokenParam, id: mandateIdParam },
    response: RevocationRequestObject,
    handler: ({ params }) =>
      Effect.gen(function* () {
        const access = yield* accessOf(params.token ?? "");
        return yield* (yield* PortalActions).revocationRequest(access, params.id ?? "");
      }),
  }),
  definePublicRoute({
    method: "POST",
    path: "/portal/{token}/mandates/{id}/revocation",
    params: { token: portalTokenParam, id: mandateIdParam },
    body: RevocationSubmission,
    response: RevocationObject,
    handler: ({ body, params }) =>
      Effect.gen(function* () {
        const access = yield* accessOf(params.token ?? "");
        return yield* (yield* PortalActions).revoke(access, params.id ?? "", body);
      }),
  }),
];
