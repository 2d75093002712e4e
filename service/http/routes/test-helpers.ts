import { Effect } from "effect";
import { InvalidRequest } from "../../errors.ts";
import { MandateObject } from "../../mandates/mandate-object.ts";
import {
  AdvanceClockRequest,
  FundRequest,
  TestClock,
  TestFunding,
  TestHelpers,
} from "../../testing/test-helpers.ts";
import { PayRequest, TestPayments, TestPaymentTransfer } from "../../testing/test-payments.ts";
import { mandate } from "../examples/mandates.ts";
import { CHAIN, IDS } from "../examples/shared.ts";
import {
  advanceClock,
  fundRequest,
  payRequest,
  testClock,
  testFunding,
  testPaymentTransfer,
} from "../examples/test-helpers.ts";
import { mandateIdParam, paymentIdParam } from "../path-params.ts";
import { defineRoute } from "../route.ts";

const helpers = Effect.service(TestHelpers);
const testPayments = Effect.service(TestPayments);

export const testHelperRoutes = [
  defineRoute({
    method: "POST",
    path: "/v1/test/mandates/{id}/fund",
    params: { id: mandateIdParam },
    operationId: "testFundMandate",
    tag: "Test helpers",
    summary: "Fund a mandate's customer",
    description:
      "Test mode: mints test tokens to the mandate's customer wallet and answers once mined. Before the customer signs, the tokens go to the mandate's deterministic test wallet, the one POST /v1/test/mandates/{id}/authorize signs with.",
    testOnly: true,
    body: FundRequest,
    response: TestFunding,
    examples: { params: { id: IDS.mandate }, request: fundRequest, response: testFunding },
    handler: ({ caller, body, params }) =>
      Effect.flatMap(helpers, (h) => h.fund(caller, params.id ?? "", body)),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/test/mandates/{id}/authorize",
    params: { id: mandateIdParam },
    operationId: "testAuthorizeMandate",
    tag: "Test helpers",
    summary: "Authorize a mandate",
    description:
      "Test mode: signs the mandate as its customer with a deterministic test wallet. Signs the terms and a permit and submits them like the hosted page does; answers with the mandate once the chain's MandateAuthorized event has been indexed, and `mandate.authorized` is raised from it. Signs whatever the mandate needs signed (its first signature, a spent approval, a cap raise); a mandate already signed is answered as it is, and a retry after a 503 waits for the signature already on chain: it never signs twice.",
    testOnly: true,
    response: MandateObject,
    examples: { params: { id: IDS.mandate }, response: mandate },
    handler: ({ caller, params }) => Effect.flatMap(helpers, (h) => h.authorize(caller, params.id ?? "")),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/test/clock/advance",
    operationId: "testAdvanceClock",
    tag: "Test helpers",
    summary: "Advance a test clock",
    description:
      "Test mode: moves a local test chain's time forward (billing periods and holds follow chain time).",
    testOnly: true,
    body: AdvanceClockRequest,
    response: TestClock,
    examples: {
      request: advanceClock,
      response: testClock,
      errors: [
        new InvalidRequest({
          code: "test_clock_unsupported",
          message: `Chain ${CHAIN.id} is not a local chain run by this deployment, so its clock cannot be moved.`,
          param: null,
        }),
      ],
    },
    handler: ({ caller, body }) => Effect.flatMap(helpers, (h) => h.advanceClock(caller, body)),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/test/payments/{id}/pay",
    params: { id: paymentIdParam },
    operationId: "testPayPayment",
    tag: "Test helpers",
    summary: "Pay a payment",
    description:
      "Test mode: sends a real token transfer to the payment's deposit address and answers once mined. On a local chain: a test payer (the payment's deterministic test wallet, or `from`) gets test tokens and gas, then sends `amount_decimal` to the deposit address with a plain ERC-20 transfer. Any amount: less (underpaid, or a first part), more (overpaid), after expires_at (late). The payment follows as for a real payer.",
    testOnly: true,
    body: PayRequest,
    response: TestPaymentTransfer,
    examples: { params: { id: IDS.payment }, request: payRequest, response: testPaymentTransfer },
    handler: ({ caller, body, params }) =>
      Effect.flatMap(testPayments, (p) => p.pay(caller, params.id ?? "", body)),
  }),
];
