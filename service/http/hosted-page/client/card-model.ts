/**
 * What a hosted page's card shows, in the parts both pages share (pure, so the wording and the focus
 * rules are unit-tested without a DOM): the model the shared card renders, and the loading, not-found,
 * load-error, error and finished states.
 */
import type { Notice } from "./card-notice.ts";
import type { PageChain } from "./chain.ts";
import type { PageError } from "./page-error.ts";
import type { DonePhase } from "./page-state.ts";
import { closingText, plural } from "./text.ts";

export interface SummaryRow {
  readonly label: string;
  readonly value: string;
}

/** The shared card's part of a page's view model; each page's model adds its own fields. */
export interface CardModel<A extends string> extends Notice<A> {
  readonly badge: string | null;
  readonly merchant: string | null;
  readonly title: string;
  readonly lead: string | null;
  readonly summary: ReadonlyArray<SummaryRow>;
  readonly footer: string | null;
  /** The page's action uses the wallet: where several are installed, the card offers to change it. */
  readonly usesWallet: boolean;
}

export const BLANK_CARD = {
  statusVisible: true,
  badge: null,
  merchant: null,
  lead: null,
  summary: [],
  error: null,
  action: null,
  busy: false,
  countdown: null,
  footer: null,
  usesWallet: false,
} as const;

export const loadingCard = (title: string) =>
  ({ ...BLANK_CARD, stage: "loading", focus: "title", title, status: "Loading…", busy: true }) as const;

/** `what`: "Authorization", "Payment". */
export const notFoundCard = (what: string) =>
  ({
    ...BLANK_CARD,
    stage: "not_found",
    focus: "title",
    title: `${what} not found`,
    lead: "This link is not valid. Ask the merchant for a new one.",
    status: `${what} not found.`,
  }) as const;

const RETRY = { kind: "retry", label: "Try again" } as const;

/** The session could not be read: the card has nothing else to show. */
export const loadErrorCard = <R extends string>(title: string, error: PageError<R>) =>
  ({
    ...BLANK_CARD,
    stage: "load_error",
    focus: "error",
    title,
    status: `${error.title}. ${error.message}`,
    error,
    action: RETRY,
  }) as const;

/**
 * A page's blank card and the states before its session is known: loading, not found, and the first
 * read failed. `title`: the page's ("Pay"); `what`: what its link names ("Payment").
 */
export const pageCards = (title: string, what: string) => ({
  blank: BLANK_CARD,
  loading: loadingCard(title),
  notFound: notFoundCard(what),
  loadError: <R extends string>(error: PageError<R>) => loadErrorCard(title, error),
});

/** An error beside the page's content; the focus moves to it. */
export const errorCard = <R extends string>(error: PageError<R>) =>
  ({
    stage: `error:${error.kind}:${error.title}`,
    focus: "error",
    status: `${error.title}. ${error.message}`,
    error,
    action: error.retry === null ? null : RETRY,
  }) as const;

/** The finished page, with the `?close=1` countdown; `confirmed` is what the status region says. */
export const doneCard = (phase: DonePhase, closeDelay: number | null, confirmed: string) => {
  const seconds = phase.countdown;
  const counting = seconds !== null && seconds > 0;
  return {
    stage: "done",
    focus: counting ? "action" : "title",
    // Fixed while the countdown runs, so screen readers announce it once, not every second.
    status:
      seconds === null
        ? confirmed
        : `${confirmed} This tab will close in ${plural(closeDelay ?? seconds, "second")}.`,
    statusVisible: false,
    action: counting ? ({ kind: "keep_open", label: "Keep this tab open" } as const) : null,
    countdown: closingText(seconds, phase.closeFailed),
  } as const;
};

/** The progress line of the steps both pages share; null for a page's own steps. */
export const walletProgress = (step: string | undefined, chain: PageChain): string | null => {
  if (step === "connect") return "Waiting for your wallet to connect…";
  if (step === "switch_chain") return `Switching your wallet to ${chain.name}…`;
  return null;
};
