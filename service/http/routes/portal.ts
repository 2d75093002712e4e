/** The customer portal: the merchant's `POST /v1/portal_sessions` (docs/portal.md). */
import { Effect } from "effect";
import { invalidParam } from "../../errors.ts";
import { CreatePortalSession, PortalSessionObject, PortalSessions } from "../../portal/portal-sessions.ts";
import { createPortalSession, portalSession } from "../examples/portal.ts";
import { defineRoute } from "../route.ts";

export const portalSessionRoutes = [
  defineRoute({
    method: "POST",
    path: "/v1/portal_sessions",
    operationId: "createPortalSession",
    tag: "Customer portal",
    summary: "A link to the customer portal for one of your customers, valid for an hour.",
    description:
      "The customer (your reference, as on its mandates and subscriptions) sees there its mandates and subscriptions with you, in this key's mode: amounts, caps, the next charge, holds and recent charges. It can cancel a subscription at the end of its period (unless `features.subscription_cancel.enabled` is false), open a mandate's authorization page to sign what waits for its signature, and revoke a mandate without gas. The `url` is shown once; send the customer to it right away. A customer no mandate names: 400 `resource_missing` (param `customer`).",
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
