/**
 * The page's state machine: pure. The flow (flow.ts) feeds it events from the wallet and the service;
 * the view (view-model.ts, dom.ts) only reads it.
 */
import type { PageError as SharedPageError } from "../../hosted-page/client/page-error.ts";
import { type CoreEvent, closing, type DonePhase, donePhase } from "../../hosted-page/client/page-state.ts";
import type { Address, Session } from "./types.ts";

export const STEPS = ["connect", "switch_chain", "sign_terms", "allowance", "submit", "confirm"] as const;
export type StepId = (typeof STEPS)[number];
export type StepStatus = "todo" | "active" | "done" | "skipped" | "failed";

/** How the escrow gets its token allowance: a signed EIP-2612 permit, an approve transaction, or not needed. */
export type AllowanceMode = "permit" | "approve" | "none";

/** What "Try again" does beside reloading: connect the wallet, or sign. */
export type Retry = "connect" | "authorize";

export type PageError = SharedPageError<Retry>;

export type Phase =
  | { readonly tag: "loading" }
  | { readonly tag: "not_found" }
  /** Waiting for the customer to connect their wallet. */
  | { readonly tag: "connect" }
  /** Connected on the right chain: waiting for the customer to sign. */
  | { readonly tag: "authorize" }
  /** A step is running (the active step says which). */
  | { readonly tag: "busy" }
  | { readonly tag: "error"; readonly error: PageError }
  /** Nothing left to sign (and the `?close=1` countdown). */
  | DonePhase
  | { readonly tag: "revoked" };

export interface State {
  readonly phase: Phase;
  readonly session: Session | null;
  readonly account: Address | null;
  readonly allowance: AllowanceMode;
  readonly steps: Readonly<Record<StepId, StepStatus>>;
  /** Seconds before a done page closes its tab (`?close=1`), or null. */
  readonly closeDelay: number | null;
}

export type Event =
  | CoreEvent<Retry>
  | { readonly type: "session"; readonly session: Session }
  | { readonly type: "step"; readonly step: StepId }
  | { readonly type: "skipped"; readonly step: StepId }
  | { readonly type: "ready_to_sign" }
  | { readonly type: "allowance"; readonly mode: AllowanceMode };

const allSteps = (status: StepStatus): Record<StepId, StepStatus> =>
  Object.fromEntries(STEPS.map((step) => [step, status])) as Record<StepId, StepStatus>;

export const initialState = (closeDelay: number | null): State => ({
  phase: { tag: "loading" },
  session: null,
  account: null,
  allowance: "permit",
  steps: allSteps("todo"),
  closeDelay,
});

const isDone = (session: Session) => !session.needs_signature && session.status === "active";

/** `step` becomes active; the steps before it are behind us (done unless skipped), those after it ahead. */
const activate = (steps: Readonly<Record<StepId, StepStatus>>, step: StepId): Record<StepId, StepStatus> => {
  const index = STEPS.indexOf(step);
  return Object.fromEntries(
    STEPS.map((id, i) => [
      id,
      i < index ? (steps[id] === "skipped" ? "skipped" : "done") : i === index ? "active" : "todo",
    ]),
  ) as Record<StepId, StepStatus>;
};

const withSteps = (
  steps: Readonly<Record<StepId, StepStatus>>,
  status: StepStatus,
  predicate: (s: StepStatus) => boolean,
) =>
  Object.fromEntries(STEPS.map((id) => [id, predicate(steps[id]) ? status : steps[id]])) as Record<
    StepId,
    StepStatus
  >;

const finished = (state: State): State => ({
  ...state,
  phase: donePhase(state.closeDelay),
  steps: withSteps(state.steps, "done", (s) => s !== "skipped"),
});

/** A session read while the page is loading, waiting or confirming. */
const onSession = (state: State, session: Session): State => {
  const next: State = {
    ...state,
    session,
    allowance: state.session === null ? (session.token.permit ? "permit" : "approve") : state.allowance,
  };
  if (session.status === "revoked") return { ...next, phase: { tag: "revoked" } };
  if (isDone(session)) return state.phase.tag === "done" ? next : finished(next);
  // Submitted (ours or an earlier visit's) and not yet confirmed: wait for the chain.
  if (session.pending_transaction !== null || !session.needs_signature)
    return { ...next, phase: { tag: "busy" }, steps: activate(state.steps, "confirm") };
  // Read again after an error whose retry is a reload: back to the start.
  const reloaded = state.phase.tag === "error" && state.phase.error.retry === "reload";
  if (state.phase.tag === "loading" || state.phase.tag === "done" || reloaded)
    return { ...next, phase: { tag: "connect" } };
  return next;
};

export const reduce = (state: State, event: Event): State => {
  switch (event.type) {
    case "session":
      return onSession(state, event.session);
    case "not_found":
      return { ...state, phase: { tag: "not_found" } };
    case "step":
      return { ...state, phase: { tag: "busy" }, steps: activate(state.steps, event.step) };
    case "skipped":
      return { ...state, steps: { ...state.steps, [event.step]: "skipped" } };
    case "connected":
      return { ...state, account: event.account };
    case "ready_to_sign":
      return {
        ...state,
        phase: { tag: "authorize" },
        steps: { ...activate(state.steps, "sign_terms"), sign_terms: "todo" },
      };
    case "allowance":
      return { ...state, allowance: event.mode };
    case "load_failed":
    case "failed":
      return {
        ...state,
        phase: { tag: "error", error: event.error },
        steps: withSteps(state.steps, "failed", (s) => s === "active"),
      };
    case "tick":
    case "keep_open":
    case "close_failed": {
      const phase = closing(state.phase, event.type);
      return phase === state.phase ? state : { ...state, phase };
    }
  }
};
