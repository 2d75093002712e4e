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

/**
 * What happens to a payment in the world, from which the machine's inputs are derived: transfers to the
 * deposit address (the watcher reports what waits there), the sweep of what waits (confirmed), a reorg
 * that takes a standing sweep out (with the transfer it swept), the merchant's return of everything
 * held, the clock passing expiry, the merchant's cancellation. Amounts never go below what stands, as
 * on a chain.
 */
type WorldStep =
  | { readonly kind: "transfer"; readonly amount: bigint }
  /** A transfer of exactly what is still missing (what is received and waiting counted). */
  | { readonly kind: "payRest" }
  | { readonly kind: "sweep" }
  | { readonly kind: "reorg"; readonly pick: number }
  | { readonly kind: "return" }
  | { readonly kind: "expire" }
  | { readonly kind: "cancel" };

const worldStepArb: fc.Arbitrary<WorldStep> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant("transfer" as const), amount: amountArb }), weight: 4 },
  { arbitrary: fc.constant({ kind: "payRest" as const }), weight: 2 },
  { arbitrary: fc.constant({ kind: "sweep" as const }), weight: 4 },
  { arbitrary: fc.record({ kind: fc.constant("reorg" as const), pick: fc.nat() }), weight: 1 },
  { arbitrary: fc.constant({ kind: "return" as const }), weight: 1 },
  { arbitrary: fc.constant({ kind: "expire" as const }), weight: 1 },
  { arbitrary: fc.constant({ kind: "cancel" as const }), weight: 1 },
);

/**
 * The documented rules (docs/payments.md, "Statuses" and "Events"), written out on their own: what the
 * payment must show after each step, from the world's amounts.
 *   - amount_received: the confirmed sweeps still standing (neither reorged out nor returned);
 *     amount_remaining: the amount less that, at least 0.
 *   - paid when what was received covers the amount; otherwise, once expired (or canceled), underpaid
 *     with something received, expired (canceled) with nothing; before that, processing once anything
 *     arrived (waiting at the address or received), requires_payment before.
 *   - reversed: a payment reported paid or underpaid whose funds were returned or reorged out so that it
 *     no longer is; it stays reversed until funds arriving again make it paid (or, expired, underpaid).
 *   - canceled only while nothing has arrived (requires_payment).
 *   - events: payment.paid, payment.underpaid, payment.reversed on entering those statuses; no other.
 */
const documented = (amount: bigint, steps: readonly WorldStep[]) => {
  let waiting = 0n;
  let sweeps: bigint[] = [];
  let closed = false;
  let canceled = false;
  let status: PaymentMachine["status"] = "requires_payment";
  const after: Array<{ input: PaymentInput; status: string; received: bigint; event: string | null }> = [];
  for (const step of steps) {
    let input: PaymentInput;
    let lost = false;
    switch (step.kind) {
      case "transfer":
      case "payRest": {
        const rest = amount - sweeps.reduce((a, b) => a + b, 0n) - waiting;
        const sent = step.kind === "transfer" ? step.amount : rest;
        if (sent <= 0n) continue;
        waiting += sent;
        input = { kind: "seen", amount: waiting };
        break;
      }
      case "sweep":
        if (waiting === 0n) continue;
        input = { kind: "received", amount: waiting };
        sweeps.push(waiting);
        waiting = 0n;
        break;
      case "reorg": {
        if (sweeps.length === 0) continue;
        const i = step.pick % sweeps.length;
        input = { kind: "unreceived", amount: sweeps[i] as bigint };
        sweeps = sweeps.filter((_, j) => j !== i);
        lost = true;
        break;
      }
      case "return": {
        const held = sweeps.reduce((a, b) => a + b, 0n);
        if (held === 0n) continue;
        input = { kind: "returned", amount: held };
        sweeps = [];
        lost = true;
        break;
      }
      case "expire":
        // The clock passes the expiry once.
        if (closed) continue;
        input = { kind: "expire" };
        closed = true;
        break;
      case "cancel":
        input = { kind: "cancel" };
        // Refused unless nothing has arrived: nothing changes.
        if (status !== "requires_payment") {
          after.push({ input, status, received: sweeps.reduce((a, b) => a + b, 0n), event: null });
          continue;
        }
        closed = true;
        canceled = true;
        break;
    }
    const received = sweeps.reduce((a, b) => a + b, 0n);
    const byAmounts =
      received >= amount
        ? "paid"
        : closed
          ? received > 0n
            ? "underpaid"
            : canceled
              ? "canceled"
              : "expired"
          : received > 0n || waiting > 0n
            ? "processing"
            : "requires_payment";
    const before: PaymentMachine["status"] = status;
    const reported = before === "paid" || before === "underpaid";
    if (lost && reported && byAmounts !== before) status = "reversed";
    else if (before === "reversed" && byAmounts !== "paid" && byAmounts !== "underpaid") status = "reversed";
    else status = byAmounts;
    const event =
      status !== before && (status === "paid" || status === "underpaid" || status === "reversed")
        ? `payment.${status}`
        : null;
    after.push({ input, status, received, event });
  }
  return after;
};

describe("payment state machine", () => {
  it("follows the documented rules step by step, from what happens in the world", () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 1n, max: 2_000n }),
        fc.array(worldStepArb, { maxLength: 40 }),
        (amount, steps) => {
          let state = newPayment(amount);
          for (const expected of documented(amount, steps)) {
            const stepped = stepPayment(state, expected.input);
            const event = stepped.ok ? stepped.step.event : null;
            if (stepped.ok) state = stepped.step.state;
            expect(
              { status: state.status, received: state.received, event },
              JSON.stringify(expected.input, (_, v) => (typeof v === "bigint" ? String(v) : v)),
            ).toEqual({
              status: expected.status,
              received: expected.received,
              event: expected.event,
            });
            expect(amountRemaining(state)).toBe(
              expected.received >= amount ? 0n : amount - expected.received,
            );
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
