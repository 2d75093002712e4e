/**
 * After a charge failed: the mandate's status, `charge.failed` (every failed charge, with its
 * failure_code), and the mandate's event that tells the merchant what the customer must do
 * (`mandate.insufficient`: top up; `mandate.requires_authorization`: sign again). Used when a
 * simulation refuses a charge and when a sent one reverted.
 */
import { Context, Effect, Layer } from "effect";
import { ChainRegistry } from "../chains/registry.ts";
import { Outbox } from "../events/outbox.ts";
import type { MandateRow } from "../mandates/mandate-object.ts";
import { MandateStore } from "../mandates/mandate-store.ts";
import { Mandates } from "../mandates/mandates.ts";
import { type FailureCode, toChargeObject } from "./charge-object.ts";
import { ChargeStore } from "./charge-store.ts";

const mandateEventOf = (failureCode: FailureCode) =>
  failureCode === "insufficient_funds"
    ? "mandate.insufficient"
    : failureCode === "approval_exhausted"
      ? "mandate.requires_authorization"
      : undefined;

const make = Effect.gen(function* () {
  const store = yield* MandateStore;
  const charges = yield* ChargeStore;
  const registry = yield* ChainRegistry;
  const mandates = yield* Mandates;
  const outbox = yield* Outbox;
  return {
    failed: (mandate: MandateRow, chargeId: string, failureCode: FailureCode) =>
      Effect.gen(function* () {
        yield* store.recordChargeFailed(mandate.id, chargeId, failureCode === "approval_exhausted");
        const type = mandateEventOf(failureCode);
        if (type !== undefined)
          yield* outbox.raise({
            merchantId: mandate.merchant_id,
            livemode: mandate.livemode,
            type,
            object: mandates.render(yield* store.reload(mandate.id)),
            key: `${chargeId}:${type}`,
          });
        const charge = yield* charges.reload(chargeId);
        yield* outbox.raise({
          merchantId: mandate.merchant_id,
          livemode: mandate.livemode,
          type: "charge.failed",
          object: toChargeObject(charge, registry.byId(charge.chain_id)),
          key: `${chargeId}:charge.failed`,
        });
      }),
  };
});

export class ChargeFailureEvents extends Context.Service<ChargeFailureEvents>()("ChargeFailureEvents", {
  make,
}) {
  static readonly layer = Layer.effect(ChargeFailureEvents, make);
}
