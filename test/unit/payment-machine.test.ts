import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  amountRemaining,
  newPayment,
  type PaymentEventType,
  type PaymentInput,
  type PaymentMachine,
  stepPayment,
} from "../../src/ledger/payment-machine.ts";

const RUNS = Number(process.env.LEDGER_RUNS ?? 500);

const amountArb = fc.bigInt({ min: 1n, max: 1_000n });
const inputArb: fc.Arbitrary<PaymentInput> = fc.oneof(
  fc.record({ kind: fc.constant("seen" as const), amount: fc.bigInt({ min: 0n, max: 1_500n }) }),
  fc.record({ kind: fc.constant("received" as const), amount: amountArb }),
  fc.record({ kind: fc.constant("received" as const), amount: amountArb }),
  fc.record({ kind: fc.constant("unreceived" as const), amount: amountArb }),
  fc.record({ kind: fc.constant("returned" as const), amount: amountArb }),
  fc.record({ kind: fc.constant("expire" as const) }),
  fc.record({ kind: fc.constant("cancel" as const) }),
);

/** Runs the inputs, skipping refused ones; returns every state and event along the way. */
const run = (amount: bigint, inputs: readonly PaymentInput[]) => {
  let state = newPayment(amount);
  const states: PaymentMachine[] = [state];
  const events: Array<PaymentEventType | null> = [];
  const accepted: PaymentInput[] = [];
  for (const input of inputs) {
    const stepped = stepPayment(state, input);
    if (!stepped.ok) continue;
    accepted.push(input);
    state = stepped.step.state;
    states.push(state);
    events.push(stepped.step.event);
  }
  return { state, states, events, accepted };
};

describe("payment state machine", () => {
  it("keeps every status consistent with the amounts", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 1n, max: 2_000n }),
        fc.array(inputArb, { maxLength: 40 }),
        (amount, inputs) => {
          for (const s of run(amount, inputs).states) {
            expect(s.received).toBeGreaterThanOrEqual(0n);
            expect(amountRemaining(s)).toBe(s.received >= s.amount ? 0n : s.amount - s.received);
            switch (s.status) {
              case "paid":
                expect(s.received).toBeGreaterThanOrEqual(s.amount);
                break;
              case "underpaid":
                expect(s.closed).toBe(true);
                expect(s.received > 0n && s.received < s.amount).toBe(true);
                break;
              case "expired":
              case "canceled":
                expect(s.closed).toBe(true);
                expect(s.received).toBe(0n);
                break;
              case "requires_payment":
                expect(s.closed || s.received > 0n || s.seen > 0n).toBe(false);
                break;
              case "processing":
                expect(s.closed).toBe(false);
                expect(s.received < s.amount).toBe(true);
                expect(s.received > 0n || s.seen > 0n).toBe(true);
                break;
              case "reversed":
                expect(s.received < s.amount).toBe(true);
                break;
            }
          }
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("raises an event exactly when the status enters paid, underpaid or reversed", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 1n, max: 2_000n }),
        fc.array(inputArb, { maxLength: 40 }),
        (amount, inputs) => {
          const { states, events } = run(amount, inputs);
          events.forEach((event, i) => {
            const before = states[i] as PaymentMachine;
            const after = states[i + 1] as PaymentMachine;
            const entered = before.status !== after.status ? after.status : null;
            const expected =
              entered === "paid" || entered === "underpaid" || entered === "reversed"
                ? `payment.${entered}`
                : null;
            expect(event).toBe(expected);
          });
          // Paid is announced once per time it comes to stand: never twice without a reversal between.
          const reported = events.filter((e): e is PaymentEventType => e !== null);
          for (let i = 1; i < reported.length; i++)
            if (reported[i] === "payment.paid") expect(reported[i - 1]).not.toBe("payment.paid");
          // A reversal only ever follows a payment that was reported.
          reported.forEach((e, i) => {
            if (e === "payment.reversed")
              expect(["payment.paid", "payment.underpaid"]).toContain(reported[i - 1]);
          });
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("counts exactly the confirmed amounts that still stand", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 1n, max: 2_000n }),
        fc.array(inputArb, { maxLength: 40 }),
        (amount, inputs) => {
          const { state, accepted } = run(amount, inputs);
          let model = 0n;
          for (const input of accepted) {
            if (input.kind === "received") model += input.amount;
            if (input.kind === "unreceived" || input.kind === "returned")
              model = model > input.amount ? model - input.amount : 0n;
          }
          expect(state.received).toBe(model);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("ends in the same status whatever order confirmed transfers arrive in", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 1n, max: 2_000n }),
        fc.array(amountArb, { minLength: 1, maxLength: 6 }),
        fc.boolean(),
        (amount, parts, expireFirst) => {
          const inputs = (order: readonly bigint[]): PaymentInput[] => [
            ...(expireFirst ? [{ kind: "expire" as const }] : []),
            ...order.map((a) => ({ kind: "received" as const, amount: a })),
          ];
          const forward = run(amount, inputs(parts)).state;
          const backward = run(amount, inputs([...parts].reverse())).state;
          expect(backward.status).toBe(forward.status);
          expect(backward.received).toBe(forward.received);
        },
      ),
      { numRuns: RUNS },
    );
  });

  it("walks the documented paths", () => {
    const walk = (amount: bigint, inputs: PaymentInput[]) => {
      const { states, events } = run(amount, inputs);
      return { statuses: states.slice(1).map((s) => s.status), events: events.filter((e) => e !== null) };
    };
    // Two partial transfers summing to the amount.
    expect(
      walk(100n, [
        { kind: "seen", amount: 40n },
        { kind: "received", amount: 40n },
        { kind: "received", amount: 60n },
      ]),
    ).toEqual({ statuses: ["processing", "processing", "paid"], events: ["payment.paid"] });
    // Underpaid at expiry, then topped up.
    expect(
      walk(100n, [{ kind: "received", amount: 30n }, { kind: "expire" }, { kind: "received", amount: 70n }]),
    ).toEqual({
      statuses: ["processing", "underpaid", "paid"],
      events: ["payment.underpaid", "payment.paid"],
    });
    // Expired with nothing, paid late.
    expect(walk(100n, [{ kind: "expire" }, { kind: "received", amount: 100n }])).toEqual({
      statuses: ["expired", "paid"],
      events: ["payment.paid"],
    });
    // Overpaid, then reorged out.
    expect(
      walk(100n, [
        { kind: "received", amount: 150n },
        { kind: "unreceived", amount: 150n },
      ]),
    ).toEqual({
      statuses: ["paid", "reversed"],
      events: ["payment.paid", "payment.reversed"],
    });
    // Returned, then the same transfer mined again elsewhere... stays reversed until funds stand again.
    expect(
      walk(100n, [
        { kind: "received", amount: 100n },
        { kind: "returned", amount: 100n },
        { kind: "expire" },
        { kind: "received", amount: 100n },
      ]),
    ).toEqual({
      statuses: ["paid", "reversed", "reversed", "paid"],
      events: ["payment.paid", "payment.reversed", "payment.paid"],
    });
    // Canceled only while nothing arrived.
    expect(stepPayment(newPayment(100n), { kind: "cancel" })).toMatchObject({
      ok: true,
      step: { state: { status: "canceled" }, event: null },
    });
    const seen = run(100n, [{ kind: "seen", amount: 1n }]).state;
    expect(stepPayment(seen, { kind: "cancel" })).toEqual({ ok: false, refusal: "not_cancelable" });
  });
});
