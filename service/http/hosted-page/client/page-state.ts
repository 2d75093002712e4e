/**
 * What both hosted pages' state machines share (pure): the events the shared flow sends them, and the
 * finished page's `?close=1` countdown.
 */
import type { PageError } from "./page-error.ts";
import type { Address } from "./wallet.ts";

/** Nothing left to do. `countdown`: seconds until the tab closes (null: it stays open). */
export interface DonePhase {
  readonly tag: "done";
  readonly countdown: number | null;
  readonly closeFailed: boolean;
}

export const donePhase = (closeDelay: number | null): DonePhase => ({
  tag: "done",
  countdown: closeDelay,
  closeFailed: false,
});

export const isDone = (phase: { readonly tag: string }): phase is DonePhase => phase.tag === "done";

/** The events the shared flow (page-flow.ts) sends a page's state machine. */
export type CoreEvent<R extends string> =
  | { readonly type: "not_found" }
  | { readonly type: "load_failed"; readonly error: PageError<R> }
  | { readonly type: "failed"; readonly error: PageError<R> }
  | { readonly type: "step"; readonly step: "connect" | "switch_chain" }
  | { readonly type: "connected"; readonly account: Address }
  /** The clock moved (every second); `at`: the page's time, Unix seconds. */
  | { readonly type: "tick"; readonly at: number }
  | { readonly type: "keep_open" }
  /** The tab is still open a second after closing it: the browser refused. */
  | { readonly type: "close_failed" };

/** The countdown's events on a page's phase: a second less, stopped, or the browser refused to close. */
export const closing = <P extends { readonly tag: string }>(
  phase: P,
  event: "tick" | "keep_open" | "close_failed",
): P | DonePhase => {
  if (!isDone(phase)) return phase;
  switch (event) {
    case "tick":
      return phase.countdown === null || phase.countdown === 0
        ? phase
        : { ...phase, countdown: phase.countdown - 1 };
    case "keep_open":
      return { ...phase, countdown: null };
    case "close_failed":
      return { tag: "done", countdown: null, closeFailed: true };
  }
};
