/**
 * The portal page's state machine: pure. The flow (flow.ts) feeds it the portal it reads and what the
 * customer does; the view (view-model.ts, dom.ts) only reads it.
 */
import type { PageError as SharedPageError } from "../../hosted-page/client/page-error.ts";
import type { CoreEvent } from "../../hosted-page/client/page-state.ts";
import type { Address, Session } from "./types.ts";

/** "Try again" only reads the portal again: every action is offered anew from it. */
export type Retry = never;
export type PageError = SharedPageError<Retry>;

/** What the customer asked to do, waiting for its confirmation (a second click). */
export interface Pending {
  readonly kind: "cancel" | "revoke";
  /** The subscription's id (cancel) or the mandate's (revoke). */
  readonly id: string;
}

export type Step =
  | "connect"
  | "switch_chain"
  | "cancel"
  | "sign_revocation"
  | "submit_revocation"
  | "confirm_revocation";

export type Phase =
  | { readonly tag: "loading" }
  | { readonly tag: "not_found" }
  | { readonly tag: "load_error"; readonly error: PageError }
  | { readonly tag: "open" }
  | { readonly tag: "confirm"; readonly pending: Pending }
  | { readonly tag: "busy"; readonly step: Step }
  | { readonly tag: "error"; readonly error: PageError };

export interface State {
  readonly phase: Phase;
  readonly session: Session | null;
  /** What the last action did, said until the next one. */
  readonly notice: string | null;
  readonly account: Address | null;
  /** The subscription or mandate the current (or last) action is about. */
  readonly target: string | null;
}

export type Event =
  | CoreEvent<Retry>
  | { readonly type: "session"; readonly session: Session }
  | { readonly type: "ask"; readonly pending: Pending }
  | { readonly type: "dismiss" }
  | { readonly type: "step"; readonly step: Step }
  | { readonly type: "succeeded"; readonly notice: string };

export const initialState = (): State => ({
  phase: { tag: "loading" },
  session: null,
  notice: null,
  account: null,
  target: null,
});

export const reduce = (state: State, event: Event): State => {
  switch (event.type) {
    case "session": {
      const phase =
        state.phase.tag === "loading" || state.phase.tag === "load_error"
          ? { tag: "open" as const }
          : state.phase;
      return { ...state, session: event.session, phase };
    }
    case "not_found":
      return { ...state, phase: { tag: "not_found" } };
    case "load_failed":
      return { ...state, phase: { tag: "load_error", error: event.error } };
    case "failed":
      return { ...state, phase: { tag: "error", error: event.error } };
    case "ask":
      return state.session === null
        ? state
        : {
            ...state,
            notice: null,
            target: event.pending.id,
            phase: { tag: "confirm", pending: event.pending },
          };
    case "dismiss":
      return state.phase.tag === "confirm" || state.phase.tag === "error"
        ? { ...state, phase: { tag: "open" } }
        : state;
    case "step":
      return { ...state, notice: null, phase: { tag: "busy", step: event.step } };
    case "connected":
      return { ...state, account: event.account };
    case "succeeded":
      return { ...state, notice: event.notice, phase: { tag: "open" } };
    case "tick":
    case "keep_open":
    case "close_failed":
      return state;
  }
};
