/** The hosted authorization page's JSON API (see mandates/authorization-*.ts and docs/authorization-page.md). */
import { Effect } from "effect";
import { getAddress, type Hex } from "viem";
import {
  AuthorizationRequestObject,
  SignaturesRequest,
  TermsRequest,
} from "../../mandates/authorization-requests.ts";
import { AuthorizationSessionObject, AuthorizationSessions } from "../../mandates/authorization-session.ts";
import { Authorizations } from "../../mandates/authorization-signing.ts";
import {
  RevocationObject,
  RevocationRequestObject,
  RevocationSubmission,
  Revocations,
} from "../../mandates/revocations.ts";
import { authorizationTokenParam } from "../path-params.ts";
import { definePublicRoute } from "../route.ts";

const sessionOf = (token: string) =>
  Effect.gen(function* () {
    const sessions = yield* AuthorizationSessions;
    return { sessions, mandate: yield* sessions.mandateFor(token) };
  });

export const authorizationRoutes = [
  definePublicRoute({
    method: "GET",
    path: "/authorize/{token}/session",
    params: { token: authorizationTokenParam },
    response: AuthorizationSessionObject,
    handler: ({ params }) =>
      Effect.flatMap(sessionOf(params.token ?? ""), ({ sessions, mandate }) => sessions.session(mandate)),
  }),
  definePublicRoute({
    method: "POST",
    path: "/authorize/{token}/terms",
    params: { token: authorizationTokenParam },
    body: TermsRequest,
    response: AuthorizationRequestObject,
    handler: ({ body, params }) =>
      Effect.gen(function* () {
        const { mandate } = yield* sessionOf(params.token ?? "");
        const authorizations = yield* Authorizations;
        const request = yield* authorizations.request(mandate, getAddress(body.customer_address) as Hex);
        return request.json;
      }),
  }),
  definePublicRoute({
    method: "POST",
    path: "/authorize/{token}/signatures",
    params: { token: authorizationTokenParam },
    body: SignaturesRequest,
    response: AuthorizationSessionObject,
    handler: ({ body, params }) =>
      Effect.gen(function* () {
        const { sessions, mandate } = yield* sessionOf(params.token ?? "");
        const submitted = yield* (yield* Authorizations).submit(mandate, body);
        return yield* sessions.session(submitted.mandate, submitted.transaction);
      }),
  }),
  definePublicRoute({
    method: "GET",
    path: "/authorize/{token}/revocation",
    params: { token: authorizationTokenParam },
    response: RevocationRequestObject,
    handler: ({ params }) =>
      Effect.gen(function* () {
        const { mandate } = yield* sessionOf(params.token ?? "");
        return yield* (yield* Revocations).request(mandate);
      }),
  }),
  definePublicRoute({
    method: "POST",
    path: "/authorize/{token}/revocation",
    params: { token: authorizationTokenParam },
    body: RevocationSubmission,
    response: RevocationObject,
    handler: ({ body, params }) =>
      Effect.gen(function* () {
        const { mandate } = yield* sessionOf(params.token ?? "");
        return yield* (yield* Revocations).submit(mandate, body);
      }),
  }),
];
