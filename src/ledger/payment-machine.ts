/**
 * A one-time payment's status, and the events that report its changes: a pure state machine over what
 * the chain and the clock say. The amounts come from confirmed chain facts (sweeps of the deposit
 * address, reorgs that undo them, returns); `seen` is what sits at the deposit address but is not yet
 * confirmed as received; `expire` and `cancel` are the clock's and the merchant's.
 *
 * | status           | means                                                          |
 * | ---------------- | -------------------------------------------------------------- |
 * | requires_payment | nothing has arrived, before expiry                             |
 * | processing       | something arrived (seen or confirmed) but not all, before expiry |
 * | paid             | the confirmed amount received covers the amount (more is fine) |
 * | underpaid        | expired with some but not all received                         |
 * | expired          | expired with nothing received                                  |
 * | canceled         | the merchant canceled it before anything arrived               |
 * | reversed         | it was paid or underpaid, then its funds were returned or reorged out |
 *
 * Events: entering `paid` raises `payment.paid`, entering `underpaid` raises `payment.underpaid`,
 * entering `reversed` raises `payment.reversed`; nothing else raises an event. A payment can be paid
 * again after a reversal (the transfer mined again, or a new one).
 */

export const PAYMENT_STATUSES = [
  "requires_payment",
  "processing",
  "paid",
  "underpaid",
  "expired",
  "canceled",
  "reversed",
] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];

export type PaymentEventType = "payment.paid" | "payment.underpaid" | "payment.reversed";

export interface PaymentMachine {
  readonly status: PaymentStatus;
  /** The amount due, in base units (> 0). */
  readonly amount: bigint;
  /** Confirmed received and still standing (sweeps, less reorged-out sweeps and returns). */
  readonly received: bigint;
  /** At the deposit address or swept but not yet confirmed. */
  readonly seen: bigint;
  /** The payment's time is up (expired, or canceled by the merchant). */
  readonly closed: boolean;
}

export type PaymentInput =
  /** The amount now waiting at the deposit address or in an unconfirmed sweep (replaces the last). */
  | { readonly kind: "seen"; readonly amount: bigint }
  /** A confirmed sweep of the deposit address. */
  | { readonly kind: "received"; readonly amount: bigint }
  /** A confirmed sweep that a reorg took out. */
  | { readonly kind: "unreceived"; readonly amount: bigint }
  /** The merchant's return of held funds, confirmed. */
  | { readonly kind: "returned"; readonly amount: bigint }
  | { readonly kind: "expire" }
  | { readonly kind: "cancel" };

export type PaymentRefusal = "not_cancelable" | "negative_amount";

export interface PaymentStep {
  readonly state: PaymentMachine;
  readonly event: PaymentEventType | null;
}

export const newPayment = (amount: bigint): PaymentMachine => ({
  status: "requires_payment",
  amount,
  received: 0n,
  seen: 0n,
  closed: false,
});

export const amountRemaining = (state: PaymentMachine): bigint =>
  state.received >= state.amount ? 0n : state.amount - state.received;

/** The status the amounts call for, before a reversal is considered. */
const settled = (state: PaymentMachine, canceled: boolean): PaymentStatus => {
  if (state.received >= state.amount) return "paid";
  if (state.closed) return state.received > 0n ? "underpaid" : canceled ? "canceled" : "expired";
  return state.received > 0n || state.seen > 0n ? "processing" : "requires_payment";
};

const EVENT_OF: Partial<Record<PaymentStatus, PaymentEventType>> = {
  paid: "payment.paid",
  underpaid: "payment.underpaid",
  reversed: "payment.reversed",
};

const REPORTED: ReadonlySet<PaymentStatus> = new Set(["paid", "underpaid"]);

export const stepPayment = (
  state: PaymentMachine,
  input: PaymentInput,
):
  | { readonly ok: true; readonly step: PaymentStep }
  | { readonly ok: false; readonly refusal: PaymentRefusal } => {
  if ("amount" in input && input.amount < 0n) return { ok: false, refusal: "negative_amount" };
  let next: PaymentMachine;
  let canceled = state.status === "canceled";
  switch (input.kind) {
    case "seen":
      next = { ...state, seen: input.amount };
      break;
    case "received":
      next = {
        ...state,
        received: state.received + input.amount,
        seen: state.seen > input.amount ? state.seen - input.amount : 0n,
      };
      break;
    case "unreceived":
    case "returned":
      next = { ...state, received: state.received > input.amount ? state.received - input.amount : 0n };
      break;
    case "expire":
      next = { ...state, closed: true };
      break;
    case "cancel":
      if (state.status !== "requires_payment" || state.seen > 0n || state.received > 0n)
        return { ok: false, refusal: "not_cancelable" };
      next = { ...state, closed: true };
      canceled = true;
      break;
  }
  let status = settled(next, canceled);
  const lost = input.kind === "unreceived" || input.kind === "returned";
  // Funds taken back from a payment reported paid or underpaid: it no longer stands as reported.
  if (lost && REPORTED.has(state.status) && status !== state.status) status = "reversed";
  // A reversed payment stays reversed until its funds stand again.
  if (state.status === "reversed" && !REPORTED.has(status)) status = "reversed";
  const event = status !== state.status ? (EVENT_OF[status] ?? null) : null;
  return { ok: true, step: { state: { ...next, status }, event } };
};
