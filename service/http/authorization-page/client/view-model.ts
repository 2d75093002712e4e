/** What the page shows for a state: pure, so wording and focus rules are unit-tested without a DOM. */
import { closingText } from "../../hosted-page/client/text.ts";
import { approvalText, capText, holdText, plural, sameAddress, shortAddress } from "./format.ts";
import { STEPS, type State, type StepId, type StepStatus } from "./state.ts";
import type { Session } from "./types.ts";

export type Action = "connect" | "authorize" | "retry" | "keep_open";

export interface ViewModel {
  /** Changes when the page reaches another stage: focus moves then (to `focus`). */
  readonly stage: string;
  readonly focus: "action" | "error" | "title";
  readonly badge: string | null;
  readonly title: string;
  readonly lead: string | null;
  readonly summary: ReadonlyArray<{ readonly label: string; readonly value: string }>;
  readonly steps: ReadonlyArray<{ readonly id: StepId; readonly label: string; readonly status: StepStatus }>;
  /** The aria-live progress text. */
  readonly status: string;
  /** false: for screen readers only (the done page says it with its title and countdown). */
  readonly statusVisible: boolean;
  readonly error: { readonly title: string; readonly message: string } | null;
  readonly action: { readonly kind: Action; readonly label: string } | null;
  readonly busy: boolean;
  readonly countdown: string | null;
  readonly footer: string | null;
}

const stepLabel = (state: State, session: Session, step: StepId): string => {
  switch (step) {
    case "connect":
      return "Connect your wallet";
    case "switch_chain":
      return `Switch to ${session.chain.name}`;
    case "sign_terms":
      return "Sign the terms";
    case "allowance":
      return state.allowance === "approve"
        ? `Approve ${session.token.symbol}`
        : state.allowance === "none"
          ? `${session.token.symbol} allowance (already set)`
          : `Sign the ${session.token.symbol} permit`;
    case "submit":
      return "Submit";
    case "confirm":
      return `Confirm on ${session.chain.name}`;
  }
};

const progressText = (state: State, session: Session, step: StepId | undefined): string => {
  switch (step) {
    case "connect":
      return "Waiting for your wallet to connect…";
    case "switch_chain":
      return `Switching your wallet to ${session.chain.name}…`;
    case "sign_terms":
      return "Sign the terms in your wallet.";
    case "allowance":
      return state.allowance === "approve"
        ? `Confirm the ${session.token.symbol} approval in your wallet, then wait for it to be mined.`
        : `Sign the ${session.token.symbol} permit in your wallet. It costs no gas.`;
    case "submit":
      return "Submitting your authorization…";
    case "confirm":
      return `Waiting for confirmation on ${session.chain.name}…`;
    default:
      return "Working…";
  }
};

const summaryOf = (state: State, session: Session) => {
  const rows = [
    { label: "Merchant", value: session.merchant.name },
    { label: "Amount", value: capText(session).replace(/^u/, "U") },
    { label: "Total approval", value: approvalText(session) },
    { label: "Token", value: `${session.token.symbol} · ${shortAddress(session.token.address)}` },
    { label: "Network", value: session.chain.name },
  ];
  const hold = holdText(session);
  if (hold !== null) rows.push({ label: "Hold", value: hold });
  const wallet = session.customer_address ?? state.account;
  if (wallet !== null) rows.push({ label: "Your wallet", value: shortAddress(wallet) });
  if (state.account !== null && wallet !== null && !sameAddress(state.account, wallet))
    rows.push({ label: "Connected", value: `${shortAddress(state.account)} (another account)` });
  return rows;
};

const base = {
  statusVisible: true,
  badge: null,
  lead: null,
  summary: [],
  steps: [],
  error: null,
  action: null,
  busy: false,
  countdown: null,
  footer: null,
} as const;

const loading: ViewModel = {
  ...base,
  stage: "loading",
  focus: "title",
  title: "Authorize payments",
  status: "Loading…",
  busy: true,
};

export const viewModel = (state: State): ViewModel => {
  const { phase, session } = state;
  if (phase.tag === "not_found" || (session === null && phase.tag !== "loading" && phase.tag !== "error"))
    return {
      ...base,
      stage: "not_found",
      focus: "title",
      title: "Authorization not found",
      lead: "This link is not valid. Ask the merchant for a new one.",
      status: "Authorization not found.",
    };
  if (session === null) {
    if (phase.tag === "error")
      return {
        ...base,
        stage: "load_error",
        focus: "error",
        title: "Authorize payments",
        status: `${phase.error.title}. ${phase.error.message}`,
        error: phase.error,
        action: { kind: "retry", label: "Try again" },
      };
    return loading;
  }

  const common = {
    ...base,
    badge: session.livemode ? null : "Test mode",
    summary: summaryOf(state, session),
    steps: STEPS.map((id) => ({ id, label: stepLabel(state, session, id), status: state.steps[id] })),
    footer: `Signing moves no money. ${session.merchant.name} can collect at most the amounts above; each collection is a separate transaction on ${session.chain.name}.`,
  };
  const renewing = session.status === "requires_authorization";
  const title = renewing
    ? `Renew your payments to ${session.merchant.name}`
    : `Authorize ${session.merchant.name}`;
  const lead = renewing
    ? `Your previous approval is used up. Sign again to keep paying ${session.merchant.name} ${capText(session)}.`
    : `${session.merchant.name} asks to collect ${capText(session)} from your wallet.`;

  switch (phase.tag) {
    case "loading":
      return loading;
    case "revoked":
      return {
        ...common,
        steps: [],
        stage: "revoked",
        focus: "title",
        title: "Authorization revoked",
        lead: `This authorization was revoked; ${session.merchant.name} can no longer collect payments with it. Ask ${session.merchant.name} for a new link if you want to pay again.`,
        status: "This authorization was revoked.",
        footer: null,
      };
    case "done": {
      const seconds = phase.countdown;
      const countdown = closingText(seconds, phase.closeFailed);
      return {
        ...common,
        stage: "done",
        focus: seconds !== null && seconds > 0 ? "action" : "title",
        title: "You're all set",
        lead: `${session.merchant.name} can now collect ${capText(session)}, ${session.approval_decimal} ${session.token.symbol} in total over the next ${plural(session.approval_periods, session.period)}. Nothing else is needed from you.`,
        // Fixed while the countdown runs, so screen readers announce it once, not every second.
        status:
          seconds === null
            ? `You're all set: your authorization is confirmed on ${session.chain.name}.`
            : `You're all set: your authorization is confirmed on ${session.chain.name}. This tab will close in ${plural(state.closeDelay ?? seconds, "second")}.`,
        statusVisible: false,
        action: seconds !== null && seconds > 0 ? { kind: "keep_open", label: "Keep this tab open" } : null,
        countdown,
      };
    }
    case "connect":
      return {
        ...common,
        stage: "connect",
        focus: "title",
        title,
        lead,
        status: "Review the terms, then connect your wallet.",
        action: { kind: "connect", label: "Connect wallet" },
      };
    case "authorize":
      return {
        ...common,
        stage: "authorize",
        focus: "action",
        title,
        lead,
        status: `Wallet connected on ${session.chain.name}. Review the terms, then sign.`,
        action: { kind: "authorize", label: "Sign and authorize" },
      };
    case "busy": {
      const active = STEPS.find((id) => state.steps[id] === "active");
      return {
        ...common,
        stage: "busy",
        focus: "title",
        title,
        lead,
        status: progressText(state, session, active),
        busy: true,
      };
    }
    case "error":
      return {
        ...common,
        stage: `error:${phase.error.kind}:${phase.error.title}`,
        focus: "error",
        title,
        lead,
        status: `${phase.error.title}. ${phase.error.message}`,
        error: phase.error,
        action: phase.error.retry === null ? null : { kind: "retry", label: "Try again" },
      };
  }
};
