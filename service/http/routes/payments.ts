import { Effect } from "effect";
import { listOf } from "../../chains/objects.ts";
import { invalidParam } from "../../errors.ts";
import { PaymentObject } from "../../payments/payment-object.ts";
import { CreatePayment, ListPaymentsQuery, Payments, ReturnPayment } from "../../payments/payments.ts";
import {
  canceledPayment,
  createPayment,
  newPayment,
  paidPayment,
  returningPayment,
  returnPayment,
} from "../examples/payments.ts";
import { CHAIN, IDS, page } from "../examples/shared.ts";
import { paymentIdParam } from "../path-params.ts";
import { defineRoute } from "../route.ts";

const withPayments = Effect.service(Payments);

export const paymentRoutes = [
  defineRoute({
    method: "POST",
    path: "/v1/payments",
    operationId: "createPayment",
    tag: "Payments",
    summary: "Create a payment",
    description:
      "A one-time payment, paid to a deposit address or from a hosted pay page. `chain` defaults to your only configured chain of this mode where payments_available is true, and `token` to the only token you accept there. The payer sends the token to `address` with a plain transfer (any wallet, an exchange withdrawal) or pays from the hosted page at `payment_url`; `payment.paid` follows once the amount is confirmed received. A chain whose payments_available is false: 400 `chain_closed`. `expires_in` (seconds, default 3600) sets `expires_at` in chain time; funds arriving later still count (a late payment) for 7 days after it.",
    body: CreatePayment,
    response: PaymentObject,
    examples: {
      request: createPayment,
      response: newPayment,
      errors: [
        invalidParam(
          "chain",
          `One-time payments are closed on chain ${CHAIN.id} (${CHAIN.name}): its payments_available is false, so new payments cannot be created there. Payments already created on it are still watched and settled. Choose another chain from GET /v1/chains.`,
          "chain_closed",
        ),
      ],
    },
    handler: ({ caller, body }) => Effect.flatMap(withPayments, (payments) => payments.create(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/payments",
    operationId: "listPayments",
    tag: "Payments",
    summary: "List payments",
    description: "Your payments, newest first; filter by status and reference.",
    body: ListPaymentsQuery,
    response: listOf(PaymentObject, "PaymentList"),
    examples: { response: page(paidPayment) },
    handler: ({ caller, body }) => Effect.flatMap(withPayments, (payments) => payments.list(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/payments/{id}",
    params: { id: paymentIdParam },
    operationId: "retrievePayment",
    tag: "Payments",
    summary: "Retrieve a payment",
    description: "The payment, with the transfers that paid it.",
    response: PaymentObject,
    examples: { params: { id: IDS.payment }, response: paidPayment },
    handler: ({ caller, params }) =>
      Effect.flatMap(withPayments, (payments) => payments.retrieve(caller, params.id ?? "")),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/payments/{id}/cancel",
    params: { id: paymentIdParam },
    operationId: "cancelPayment",
    tag: "Payments",
    summary: "Cancel a payment",
    description:
      "Only a payment to which nothing has arrived (status `requires_payment`). Otherwise 400 `payment_not_cancelable`. Funds sent to a canceled payment's address later still reach you (the address can only pay you) and the payment shows them, like a late payment.",
    response: PaymentObject,
    examples: {
      params: { id: IDS.payment },
      response: canceledPayment,
      errors: [
        invalidParam(
          "id",
          "Only a payment to which nothing has arrived can be canceled; this one is paid.",
          "payment_not_cancelable",
        ),
      ],
    },
    handler: ({ caller, params }) =>
      Effect.flatMap(withPayments, (payments) => payments.cancel(caller, params.id ?? "")),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/payments/{id}/return",
    params: { id: paymentIdParam },
    operationId: "returnPayment",
    tag: "Payments",
    summary: "Return a payment",
    description:
      "Returns a payment's held funds to the payer; `payment.reversed` follows. Sends everything of the payment held in escrow to `address`, or by default to the sender of the payment's (largest) transfer. Only on chains with escrow holds, during the hold, one return at a time, and only of a payment whose terms name this service's operator (the payee can return one made under a former operator itself): otherwise 400 `payment_not_returnable`.",
    body: ReturnPayment,
    response: PaymentObject,
    examples: {
      params: { id: IDS.payment },
      request: returnPayment,
      response: returningPayment,
      errors: [
        invalidParam("id", "A return of this payment is already under way.", "payment_not_returnable"),
      ],
    },
    handler: ({ caller, body, params }) =>
      Effect.flatMap(withPayments, (payments) => payments.returnPayment(caller, params.id ?? "", body)),
  }),
];
