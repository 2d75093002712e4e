/** The hosted authorization page's JSON API (see mandates/authorization.ts and docs/authorization-page.md). */
import { Effect } from "effect";
import { getAddress, type Hex } from "viem";
import { Authorizations, SignaturesRequest, TermsRequest } from "../../mandates/authorization.ts";
import { Mandates } from "../../mandates/mandates.ts";
import { authorizationTokenParam } from "../path-params.ts";
import { definePublicRoute } from "../route.ts";

const withSession = (token: string) =>
  Effect.gen(function* () {
    const authorizations = yield* Authorizations;
    return { authorizations, mandate: yield* authorizations.mandateFor(token) };
  });

export const authorizationRoutes = [
  definePublicRoute({
    method: "GET",
    path: "/authorize/{token}/session",
    params: { token: authorizationTokenParam },
    handler: ({ params }) =>
      Effect.flatMap(withSession(params.token ?? ""), ({ authorizations, mandate }) =>
        authorizations.session(mandate),
      ),
  }),
  definePublicRoute({
    method: "POST",
    path: "/authorize/{token}/terms",
    params: { token: authorizationTokenParam },
    body: TermsRequest,
    handler: ({ body, params }) =>
      Effect.flatMap(withSession(params.token ?? ""), ({ authorizations, mandate }) =>
        Effect.map(
          authorizations.request(mandate, getAddress(body.customer_address) as Hex),
          (request) => request.json,
        ),
      ),
  }),
  definePublicRoute({
    method: "POST",
    path: "/authorize/{token}/signatures",
    params: { token: authorizationTokenParam },
    body: SignaturesRequest,
    handler: ({ body, params }) =>
      Effect.gen(function* () {
        const { authorizations, mandate } = yield* withSession(params.token ?? "");
        yield* authorizations.submit(mandate, body);
        const mandates = yield* Mandates;
        return yield* authorizations.session(yield* mandates.reload(mandate.id));
      }),
  }),
];
