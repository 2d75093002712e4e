/**
 * After a charge failed for the customer's reasons: the mandate's status, and the event that tells the
 * merchant what to do (`mandate.insufficient`: the customer tops up; `mandate.requires_authorization`:
 * the customer signs again). Used when a simulation refuses a charge and when a sent one reverted.
 */
import { Context, Effect, Layer } from "effect";
import { Outbox } from "../events/outbox.ts";
import type { MandateRow } from "../mandates/mandate-object.ts";
import { MandateStore } from "../mandates/mandate-store.ts";
import { Mandates } from "../mandates/mandates.ts";
import type { FailureCode } from "./charge-object.ts";

const eventOf = (failureCode: FailureCode) =>
  failureCode === "insufficient_funds"
    ? "mandate.insufficient"
    : failureCode === "approval_exhausted"
      ? "mandate.requires_authorization"
      : undefined;

const make = Effect.gen(function* () {
  const store = yield* MandateStore;
  const mandates = yield* Mandates;
  const outbox = yield* Outbox;
  return {
    failed: (mandate: MandateRow, chargeId: string, failureCode: FailureCode) =>
      Effect.gen(function* () {
        yield* store.recordChargeFailed(mandate.id, chargeId, failureCode === "approval_exhausted");
        const type = eventOf(failureCode);
        if (type === undefined) return;
        yield* outbox.raise({
          merchantId: mandate.merchant_id,
          livemode: mandate.livemode,
          type,
          object: mandates.render(yield* store.reload(mandate.id)),
          key: `${chargeId}:${type}`,
        });
      }),
  };
});

export class ChargeFailureEvents extends Context.Service<ChargeFailureEvents>()("ChargeFailureEvents", {
  make,
}) {
  static readonly layer = Layer.effect(ChargeFailureEvents, make);
}
