import { Effect } from "effect";
import { listOf } from "../../chains/objects.ts";
import { ChargeObject } from "../../charges/charge-object.ts";
import { Charges, CreateCharge, ListChargesQuery } from "../../charges/charges.ts";
import { MandateObject } from "../../mandates/mandate-object.ts";
import { CreateMandate, ListMandatesQuery, Mandates } from "../../mandates/mandates.ts";
import { chargeIdParam, mandateIdParam } from "../path-params.ts";
import { defineRoute } from "../route.ts";

const withMandates = Effect.service(Mandates);
const withCharges = Effect.service(Charges);

export const mandateRoutes = [
  defineRoute({
    method: "POST",
    path: "/v1/mandates",
    operationId: "createMandate",
    tag: "Mandates",
    summary: "Open a mandate; send the customer to its authorization_url to sign it.",
    description:
      "`chain` defaults to your only configured chain of this mode and `token` to the only token you accept there; with several, name one. `approval_periods` (default 12) sets how many periods one signature covers. A chain whose subscriptions_available is false refuses new mandates with 400 `chain_closed`.",
    body: CreateMandate,
    response: MandateObject,
    handler: ({ caller, body }) => Effect.flatMap(withMandates, (mandates) => mandates.create(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/mandates",
    operationId: "listMandates",
    tag: "Mandates",
    summary: "Your mandates, newest first; filter by customer and status.",
    body: ListMandatesQuery,
    response: listOf(MandateObject, "MandateList"),
    handler: ({ caller, body }) => Effect.flatMap(withMandates, (mandates) => mandates.list(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/mandates/{id}",
    params: { id: mandateIdParam },
    operationId: "retrieveMandate",
    tag: "Mandates",
    summary: "A mandate.",
    response: MandateObject,
    handler: ({ caller, params }) =>
      Effect.flatMap(withMandates, (mandates) => mandates.retrieve(caller, params.id ?? "")),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/mandates/{id}/charges",
    params: { id: mandateIdParam },
    operationId: "createCharge",
    tag: "Charges",
    summary: "Charge a mandate (at most its cap, once per period). The outcome follows by event.",
    description:
      "Above the cap: 400 `mandate_cap_exceeded`, nothing is sent. A second charge in a period: 400 `period_already_charged`. Otherwise the charge is simulated on chain: when it would succeed it is submitted (the service pays the gas) and returned as `pending`, and `charge.succeeded` follows; when the customer cannot cover it, it is returned `failed` with `failure_code` `insufficient_funds` (and `mandate.insufficient` is raised), or `approval_exhausted` (and `mandate.requires_authorization`), without spending gas.",
    body: CreateCharge,
    response: ChargeObject,
    handler: ({ caller, body, params }) =>
      Effect.flatMap(withCharges, (charges) => charges.create(caller, params.id ?? "", body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/mandates/{id}/charges",
    params: { id: mandateIdParam },
    operationId: "listMandateCharges",
    tag: "Charges",
    summary: "A mandate's charges, newest first.",
    body: ListChargesQuery,
    response: listOf(ChargeObject, "ChargeList"),
    handler: ({ caller, body, params }) =>
      Effect.flatMap(withCharges, (charges) => charges.listForMandate(caller, params.id ?? "", body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/charges/{id}",
    params: { id: chargeIdParam },
    operationId: "retrieveCharge",
    tag: "Charges",
    summary: "A charge.",
    response: ChargeObject,
    handler: ({ caller, params }) =>
      Effect.flatMap(withCharges, (charges) => charges.retrieve(caller, params.id ?? "")),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/charges/{id}/return",
    params: { id: chargeIdParam },
    operationId: "returnCharge",
    tag: "Charges",
    summary: "Return a held charge to the customer (only during its hold). `charge.returned` follows.",
    response: ChargeObject,
    handler: ({ caller, params }) =>
      Effect.flatMap(withCharges, (charges) => charges.returnCharge(caller, params.id ?? "")),
  }),
];
