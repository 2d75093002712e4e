/** The hosted pay page's JSON API (see payments/pay-session.ts, payments/gasless-payments.ts and docs/pay-page.md). */
import { Effect } from "effect";
import { GaslessPayments, PayAuthorizationRequest } from "../../payments/gasless-payments.ts";
import { PaySessionObject, PaySessions } from "../../payments/pay-session.ts";
import { payPageTokenParam } from "../path-params.ts";
import { definePublicRoute } from "../route.ts";

const sessionOf = (token: string) =>
  Effect.gen(function* () {
    const sessions = yield* PaySessions;
    return { sessions, payment: yield* sessions.paymentFor(token) };
  });

export const payPageRoutes = [
  definePublicRoute({
    method: "GET",
    path: "/pay/{token}/session",
    params: { token: payPageTokenParam },
    response: PaySessionObject,
    handler: ({ params }) =>
      Effect.flatMap(sessionOf(params.token ?? ""), ({ sessions, payment }) => sessions.session(payment)),
  }),
  definePublicRoute({
    method: "POST",
    path: "/pay/{token}/authorizations",
    params: { token: payPageTokenParam },
    body: PayAuthorizationRequest,
    response: PaySessionObject,
    handler: ({ body, params }) =>
      Effect.gen(function* () {
        const { sessions, payment } = yield* sessionOf(params.token ?? "");
        yield* (yield* GaslessPayments).submit(payment, body);
        return yield* sessions.reloaded(payment.id);
      }),
  }),
];
