/**
 * The pay page's state machine: pure. The flow (flow.ts) feeds it the sessions it reads every ~2 s, the
 * clock's ticks and the wallet's progress; the view (view-model.ts, dom.ts) only reads it.
 */
import type { PageError as SharedPageError } from "../../hosted-page/client/page-error.ts";
import { type CoreEvent, closing, type DonePhase, donePhase } from "../../hosted-page/client/page-state.ts";
import { isZero } from "./format.ts";
import type { Session } from "./types.ts";

/** What the payer is told about the payment, from the session alone. */
export type PayStatus =
  /** Nothing arrived yet. */
  | "waiting"
  /** Part arrived (confirmed or not); the rest is still to send. */
  | "partly_received"
  /** Everything due arrived; the chain is confirming it. */
  | "confirming"
  | "paid"
  | "underpaid"
  | "expired"
  | "canceled"
  | "reversed";

export const payStatus = (session: Session): PayStatus => {
  switch (session.status) {
    case "paid":
    case "underpaid":
    case "expired":
    case "canceled":
    case "reversed":
      return session.status;
    default:
      if (isZero(session.amount_remaining_decimal)) return "confirming";
      return isZero(session.amount_received_decimal) && isZero(session.amount_pending_decimal)
        ? "waiting"
        : "partly_received";
  }
};

/** Statuses where the payer can still send the rest. */
export const takesPayment = (status: PayStatus) => status === "waiting" || status === "partly_received";

/** The wallet's steps, for the progress line. */
export type Step = "connect" | "switch_chain" | "sign" | "submit" | "send" | "mining";

/** What "Try again" does beside reloading: pay again, gasless or by a transfer. */
export type Retry = "pay_gasless" | "pay_transfer";

export type PageError = SharedPageError<Retry>;

export type Phase =
  | { readonly tag: "loading" }
  | { readonly tag: "not_found" }
  | { readonly tag: "load_error"; readonly error: PageError }
  /** The payment is shown; the payer can send to the address or use the wallet button. */
  | { readonly tag: "open" }
  /** A wallet step is running. */
  | { readonly tag: "busy"; readonly step: Step }
  | { readonly tag: "error"; readonly error: PageError }
  /** Paid (and the `?close=1` countdown). */
  | DonePhase
  /** Expired, underpaid, canceled or reversed: nothing more to do here. */
  | { readonly tag: "closed" };

/** A payment this page sent (a gasless authorization, or the wallet's transfer), until it shows up. */
export interface Sent {
  readonly kind: "gasless" | "transfer";
  /** The session's transfer count when it was sent: one more means it arrived. */
  readonly transfers: number;
  readonly hash: string | null;
}

export interface State {
  readonly phase: Phase;
  readonly session: Session | null;
  readonly sent: Sent | null;
  /** Chain time minus the page's clock, in seconds (the largest seen: chain time never goes back). */
  readonly offset: number | null;
  /** The page's clock, Unix seconds (the last tick). */
  readonly localNow: number;
  /** Seconds before a paid page closes its tab (`?close=1`), or null. */
  readonly closeDelay: number | null;
}

export type Event =
  | CoreEvent<Retry>
  /** A session read at the page's time `at` (Unix seconds). */
  | { readonly type: "session"; readonly session: Session; readonly at: number }
  | { readonly type: "step"; readonly step: Step }
  | { readonly type: "sent"; readonly kind: Sent["kind"]; readonly hash: string | null }
  /** Back to the payment after an error the payer dismissed by acting again. */
  | { readonly type: "resume" };

export const initialState = (closeDelay: number | null, now: number): State => ({
  phase: { tag: "loading" },
  session: null,
  sent: null,
  offset: null,
  localNow: now,
  closeDelay,
});

/** The chain's time now, as the page estimates it between reads. */
export const chainNow = (state: State): number | null =>
  state.offset === null ? null : state.localNow + state.offset;

/** Seconds left before the payment expires (chain time); null before the first session. */
export const secondsLeft = (state: State): number | null => {
  const now = chainNow(state);
  return now === null || state.session === null ? null : state.session.expires_at - now;
};

const SENT_FAILED: PageError = {
  kind: "server",
  title: "Payment not confirmed",
  message: "Your payment's transaction failed on the network. Nothing was taken from your wallet; try again.",
  retry: "pay_gasless",
};

const onSession = (state: State, session: Session, at: number): State => {
  const offset = Math.max(state.offset ?? Number.NEGATIVE_INFINITY, session.now - at);
  const status = payStatus(session);
  // The latest gasless attempt is ours (sending made it the latest) or its replacement.
  const failed = state.sent?.kind === "gasless" && session.gasless_transaction?.status === "failed";
  const arrived = state.sent !== null && session.transfers > state.sent.transfers;
  const sent = failed || arrived || !takesPayment(status) ? null : state.sent;
  const next: State = { ...state, session, offset, sent, localNow: Math.max(state.localNow, at) };
  if (status === "paid")
    return state.phase.tag === "done" ? next : { ...next, phase: donePhase(state.closeDelay) };
  if (status !== "waiting" && status !== "partly_received" && status !== "confirming")
    return { ...next, phase: { tag: "closed" } };
  if (failed) return { ...next, phase: { tag: "error", error: SENT_FAILED } };
  switch (state.phase.tag) {
    case "error":
      // A wallet error is stale once the payment moved on (something arrived meanwhile).
      return state.session !== null && payStatus(state.session) !== status
        ? { ...next, phase: { tag: "open" } }
        : next;
    case "busy":
    case "open":
      return next;
    default:
      return { ...next, phase: { tag: "open" } };
  }
};

export const reduce = (state: State, event: Event): State => {
  switch (event.type) {
    case "session":
      return onSession(state, event.session, event.at);
    case "not_found":
      return { ...state, phase: { tag: "not_found" } };
    case "load_failed":
      return { ...state, phase: { tag: "load_error", error: event.error } };
    case "step":
      return { ...state, phase: { tag: "busy", step: event.step } };
    case "sent":
      return {
        ...state,
        phase: { tag: "open" },
        sent: { kind: event.kind, hash: event.hash, transfers: state.session?.transfers ?? 0 },
      };
    case "failed":
      return { ...state, phase: { tag: "error", error: event.error } };
    case "connected":
      return state; // the payer's account is the wallet's business until it signs
    case "resume":
      return state.phase.tag === "error" || state.phase.tag === "busy"
        ? { ...state, phase: { tag: "open" } }
        : state;
    case "tick":
      return { ...state, localNow: Math.max(state.localNow, event.at), phase: closing(state.phase, "tick") };
    case "keep_open":
    case "close_failed":
      return { ...state, phase: closing(state.phase, event.type) };
  }
};
