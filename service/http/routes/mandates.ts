import { Effect } from "effect";
import { listOf } from "../../chains/objects.ts";
import { ChargeObject } from "../../charges/charge-object.ts";
import { Charges, CreateCharge, ListChargesQuery } from "../../charges/charges.ts";
import { InvalidRequest } from "../../errors.ts";
import { MandateObject } from "../../mandates/mandate-object.ts";
import { CreateMandate, ListMandatesQuery, Mandates, UpdateMandate } from "../../mandates/mandates.ts";
import {
  charge,
  createCharge,
  createMandate,
  mandate,
  mandateWithPendingRaise,
  pendingCharge,
  pendingMandate,
  raiseCap,
  returningCharge,
} from "../examples/mandates.ts";
import { CHAIN, IDS, page } from "../examples/shared.ts";
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
    summary: "Create a mandate",
    description:
      "Opens a mandate; send the customer to its `authorization_url` to sign it. `chain` defaults to your only configured chain of this mode and `token` to the only token you accept there; with several, name one. `approval_periods` (default 12) sets how many periods one signature covers. A chain whose subscriptions_available is false refuses new mandates with 400 `chain_closed`.",
    body: CreateMandate,
    response: MandateObject,
    examples: {
      request: createMandate,
      response: pendingMandate,
      errors: [
        new InvalidRequest({
          code: "chain_not_configured",
          message: `You have not configured chain ${CHAIN.id}: set a payout address with POST /v1/merchant/chains first.`,
          param: "chain",
        }),
      ],
    },
    // Reads the chain's head and writes the mandate, nothing else: a duplicate's run rolls back whole.
    transactional: true,
    handler: ({ caller, body }) => Effect.flatMap(withMandates, (mandates) => mandates.create(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/mandates",
    operationId: "listMandates",
    tag: "Mandates",
    summary: "List mandates",
    description: "Your mandates, newest first; filter by customer and status.",
    body: ListMandatesQuery,
    response: listOf(MandateObject, "MandateList"),
    examples: { response: page(mandate) },
    handler: ({ caller, body }) => Effect.flatMap(withMandates, (mandates) => mandates.list(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/mandates/{id}",
    params: { id: mandateIdParam },
    operationId: "retrieveMandate",
    tag: "Mandates",
    summary: "Retrieve a mandate",
    response: MandateObject,
    examples: { params: { id: IDS.mandate }, response: mandate },
    handler: ({ caller, params }) =>
      Effect.flatMap(withMandates, (mandates) => mandates.retrieve(caller, params.id ?? "")),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/mandates/{id}",
    params: { id: mandateIdParam },
    operationId: "updateMandate",
    tag: "Mandates",
    summary: "Update a mandate",
    description:
      "Changes a mandate's cap (or its reference); it keeps its id and `authorization_url`. A higher `cap_decimal` becomes the mandate's `pending_update` and raises `mandate.cap_change_requested`: the customer signs the new terms once at the same authorization_url (no gas), the cap in force stays chargeable until then, and `mandate.cap_changed` follows once the signature is on chain. The cap in force again cancels a pending raise. A lower `cap_decimal` needs nothing from the customer: charges above it are refused from this answer on, the service lowers it on chain (`lowerCap`, it pays the gas; the approval left shrinks to at most cap × approval_periods) and `mandate.cap_changed` follows once mined. A mandate nobody signed yet takes the new cap at once. A revoked one: 400 `mandate_revoked`.",
    body: UpdateMandate,
    response: MandateObject,
    examples: {
      params: { id: IDS.mandate },
      request: raiseCap,
      response: mandateWithPendingRaise,
      errors: [
        new InvalidRequest({
          code: "mandate_revoked",
          message: "The customer revoked this mandate; its cap cannot change.",
          param: null,
        }),
      ],
    },
    // The update and the relayer's transaction commit together; the transaction is broadcast after.
    transactional: true,
    handler: ({ caller, body, params }) =>
      Effect.flatMap(withMandates, (mandates) => mandates.update(caller, params.id ?? "", body)),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/mandates/{id}/charges",
    params: { id: mandateIdParam },
    operationId: "createCharge",
    tag: "Charges",
    summary: "Create a charge",
    description:
      "Charges a mandate, at most its cap and once per period; the outcome follows by event. Above the cap: 400 `mandate_cap_exceeded`, nothing is sent. A second charge in a period: 400 `period_already_charged`. Otherwise the charge is simulated on chain: when it would succeed it is submitted (the service pays the gas) and returned as `pending`, and `charge.succeeded` follows; when the customer cannot cover it, it is returned `failed` with `failure_code` `insufficient_funds` (and `mandate.insufficient` is raised), or `approval_exhausted` (and `mandate.requires_authorization`), without spending gas.",
    body: CreateCharge,
    response: ChargeObject,
    examples: {
      params: { id: IDS.mandate },
      request: createCharge,
      response: pendingCharge,
      errors: [
        new InvalidRequest({
          code: "mandate_cap_exceeded",
          message:
            "The amount 30 exceeds the mandate's cap of 25 USDC per period. Raise it with POST /v1/mandates/{id} (cap_decimal): the customer signs the new cap at the mandate's authorization_url.",
          param: "amount_decimal",
        }),
        new InvalidRequest({
          code: "period_already_charged",
          message: `This mandate was already charged for period 0 (${IDS.charge}), which runs until 2026-04-02T10:16:00.000Z.`,
          param: null,
        }),
        new InvalidRequest({
          code: "mandate_not_authorized",
          message: "The customer has not signed this mandate yet: send them to its authorization_url.",
          param: null,
        }),
      ],
    },
    handler: ({ caller, body, params }) =>
      Effect.flatMap(withCharges, (charges) => charges.create(caller, params.id ?? "", body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/mandates/{id}/charges",
    params: { id: mandateIdParam },
    operationId: "listMandateCharges",
    tag: "Charges",
    summary: "List a mandate's charges",
    description: "The mandate's charges, newest first.",
    body: ListChargesQuery,
    response: listOf(ChargeObject, "ChargeList"),
    examples: { params: { id: IDS.mandate }, response: page(charge) },
    handler: ({ caller, body, params }) =>
      Effect.flatMap(withCharges, (charges) => charges.listForMandate(caller, params.id ?? "", body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/charges/{id}",
    params: { id: chargeIdParam },
    operationId: "retrieveCharge",
    tag: "Charges",
    summary: "Retrieve a charge",
    response: ChargeObject,
    examples: { params: { id: IDS.charge }, response: charge },
    handler: ({ caller, params }) =>
      Effect.flatMap(withCharges, (charges) => charges.retrieve(caller, params.id ?? "")),
  }),
  defineRoute({
    method: "POST",
    path: "/v1/charges/{id}/return",
    params: { id: chargeIdParam },
    operationId: "returnCharge",
    tag: "Charges",
    summary: "Return a charge",
    description: "Returns a held charge to the customer, only during its hold; `charge.returned` follows.",
    response: ChargeObject,
    examples: {
      params: { id: IDS.charge },
      response: returningCharge,
      errors: [
        new InvalidRequest({
          code: "charge_not_returnable",
          message: "The hold has ended; the money is being released to you.",
          param: null,
        }),
      ],
    },
    handler: ({ caller, params }) =>
      Effect.flatMap(withCharges, (charges) => charges.returnCharge(caller, params.id ?? "")),
  }),
];
