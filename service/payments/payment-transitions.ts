/**
 * Moves a locked payment through its state machine (src/ledger/payment-machine.ts) and returns the
 * event the step raised, if any, carrying the payment as it stands after it. The event's key is the
 * payment's n-th event, so however often a step is retried in a rolled-back transaction, or a fact
 * re-read, the outbox keeps one event per change. Callers hold the payment's row lock.
 */
import { Context, Effect, Layer } from "effect";
import { type PaymentInput, type PaymentRefusal, stepPayment } from "../../src/ledger/payment-machine.ts";
import { eventIdForFact } from "../events/event-ids.ts";
import type { NewEvent } from "../events/outbox.ts";
import { machineOf, type PaymentRow } from "./payment-object.ts";
import { PaymentRender } from "./payment-render.ts";
import { PaymentStore } from "./payment-store.ts";

/** When the step happened (chain time, unix seconds), and the chain log that caused it, if one did. */
export interface StepCause {
  readonly now: number;
  readonly onchain?: NewEvent["onchain"];
}

export type Stepped =
  | { readonly ok: true; readonly event: NewEvent | undefined }
  | { readonly ok: false; readonly refusal: PaymentRefusal };

const make = Effect.gen(function* () {
  const store = yield* PaymentStore;
  const renderer = yield* PaymentRender;

  /**
   * One input on each of several locked payments (each named once), with a few statements whatever their
   * number; the outcome of each, in order.
   */
  const stepEach = (
    items: ReadonlyArray<{
      readonly row: PaymentRow;
      readonly input: PaymentInput;
      readonly cause: StepCause;
    }>,
  ) =>
    Effect.gen(function* () {
      const stepped = items.map((item) => ({
        ...item,
        result: stepPayment(machineOf(item.row), item.input),
      }));
      yield* store.saveMachines(
        stepped.flatMap(({ row, cause, result }) =>
          result.ok
            ? [{ id: row.id, state: result.step.state, raised: result.step.event !== null, now: cause.now }]
            : [],
        ),
      );
      const raising = stepped.flatMap(({ row, result }) =>
        result.ok && result.step.event !== null ? [row.id] : [],
      );
      const objects = new Map(
        (yield* renderer.renderMany(yield* store.reloadMany(raising))).map(
          (object) => [object.id, object] as const,
        ),
      );
      return stepped.map(({ row, cause, result }): Stepped => {
        if (!result.ok) return { ok: false, refusal: result.refusal };
        const { event } = result.step;
        if (event === null) return { ok: true, event: undefined };
        const n = row.transitions + 1;
        // Never before the payment's last change (a reorg's new head may carry an earlier time).
        const created = Math.max(cause.now, row.paid_at ?? 0, row.canceled_at ?? 0);
        const key = `payment:${row.id}:${n}`;
        return {
          ok: true,
          event: {
            id: eventIdForFact(key, created, n),
            merchantId: row.merchant_id,
            livemode: row.livemode,
            type: event,
            created,
            object: objects.get(row.id),
            key,
            ...(cause.onchain ? { onchain: cause.onchain } : {}),
          },
        };
      });
    });

  /** One input on one locked payment. */
  const step = (row: PaymentRow, input: PaymentInput, cause: StepCause) =>
    Effect.map(stepEach([{ row, input, cause }]), (stepped) => stepped[0] as Stepped);

  /** Several inputs in order on one locked payment; returns the events raised. */
  const steps = (id: string, inputs: ReadonlyArray<PaymentInput>, cause: StepCause) =>
    Effect.gen(function* () {
      const events: NewEvent[] = [];
      for (const input of inputs) {
        const stepped = yield* step(yield* store.reload(id), input, cause);
        if (stepped.ok && stepped.event) events.push(stepped.event);
      }
      return events;
    });

  return { step, stepEach, steps };
});

export class PaymentTransitions extends Context.Service<PaymentTransitions>()("PaymentTransitions", {
  make,
}) {
  static readonly layer = Layer.effect(PaymentTransitions, make);
}
