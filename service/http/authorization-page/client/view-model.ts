/** What the page shows for a state: pure, so wording and focus rules are unit-tested without a DOM. */
import * as cards from "../../hosted-page/client/card-model.ts";
import { approvalText, capText, holdText, plural, sameAddress, shortAddress } from "./format.ts";
import { STEPS, type State, type StepId, type StepStatus } from "./state.ts";
import type { Session } from "./types.ts";

export type Action = "connect" | "authorize" | "retry" | "keep_open";

export interface ViewModel extends cards.CardModel<Action> {
  readonly steps: ReadonlyArray<{ readonly id: StepId; readonly label: string; readonly status: StepStatus }>;
  /** Said before the customer acts when the token needs an approval transaction (no permit). */
  readonly gas: { readonly title: string; readonly message: string } | null;
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
    case "sign_terms":
      return "Sign the terms in your wallet.";
    case "allowance":
      return state.allowance === "approve"
        ? `Confirm the ${session.token.symbol} approval in your wallet (it pays the gas in ${session.chain.native_currency.symbol}), then wait for it to be mined.`
        : `Sign the ${session.token.symbol} permit in your wallet. It costs no gas.`;
    case "submit":
      return "Submitting your authorization…";
    case "confirm":
      return `Waiting for confirmation on ${session.chain.name}…`;
    default:
      return cards.walletProgress(step, session.chain) ?? "Working…";
  }
};

const summaryOf = (state: State, session: Session) => {
  const change = session.cap_change;
  const rows = [
    { label: change ? "New limit" : "Amount", value: capText(session).replace(/^u/, "U") },
    ...(change
      ? [
          {
            label: "Current limit",
            value: `${change.from_decimal} ${session.token.symbol} per ${session.period}`,
          },
        ]
      : []),
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

/**
 * The token has no permit: the customer's wallet sends one approve transaction and pays its gas, once.
 * Said from the start (the session tells whether the token has a permit); gone once the terms show
 * that the wallet's allowance is already enough.
 */
const gasNotice = (state: State, session: Session): ViewModel["gas"] => {
  if (state.allowance !== "approve") return null;
  const { token, chain } = session;
  return {
    title: "This token needs one approval transaction",
    message: `${token.symbol} doesn't support gasless approvals (EIP-2612 permits), so your wallet sends one approval transaction on ${chain.name} and pays its network fee (gas) in ${chain.native_currency.symbol}. After that, every charge costs you no gas: the payment service sends each one and pays its fees.`,
  };
};

const opening = cards.pageCards("Authorize payments", "Authorization");
const base = { ...opening.blank, steps: [], gas: null } as const;

const loading: ViewModel = { ...base, ...opening.loading };

export const viewModel = (state: State): ViewModel => {
  const { phase, session } = state;
  if (phase.tag === "not_found" || (session === null && phase.tag !== "loading" && phase.tag !== "error"))
    return { ...base, ...opening.notFound };
  if (session === null)
    return phase.tag === "error" ? { ...base, ...opening.loadError(phase.error) } : loading;

  const common = {
    ...base,
    badge: session.livemode ? null : "Test mode",
    merchant: session.merchant.name,
    summary: summaryOf(state, session),
    steps: STEPS.map((id) => ({ id, label: stepLabel(state, session, id), status: state.steps[id] })),
    gas: gasNotice(state, session),
    footer: `Signing moves no money. ${session.merchant.name} can collect at most the amounts above; each collection is a separate transaction on ${session.chain.name}.`,
  };
  const renewing = session.status === "requires_authorization";
  const change = session.cap_change;
  const title = change
    ? `Raise your limit for ${session.merchant.name}`
    : renewing
      ? `Renew your payments to ${session.merchant.name}`
      : `Authorize ${session.merchant.name}`;
  const lead = change
    ? `${session.merchant.name} asks to raise your limit from ${change.from_decimal} to ${change.to_decimal} ${session.token.symbol} per ${session.period}. Until you sign, it can collect at most ${change.from_decimal} ${session.token.symbol} per ${session.period}.`
    : renewing
      ? `Your previous approval is used up. Sign again to keep paying ${session.merchant.name} ${capText(session)}.`
      : `${session.merchant.name} asks to collect ${capText(session)} from your wallet.`;

  switch (phase.tag) {
    case "loading":
      return loading;
    case "revoked":
      return {
        ...common,
        steps: [],
        gas: null,
        stage: "revoked",
        focus: "title",
        title: "Authorization revoked",
        lead: `This authorization was revoked; ${session.merchant.name} can no longer collect payments with it. Ask ${session.merchant.name} for a new link if you want to pay again.`,
        status: "This authorization was revoked.",
        footer: null,
      };
    case "done":
      return {
        ...common,
        gas: null,
        ...cards.doneCard(
          phase,
          state.closeDelay,
          `You're all set: your authorization is confirmed on ${session.chain.name}.`,
        ),
        title: "You're all set",
        lead: `${session.merchant.name} can now collect ${capText(session)}, ${session.approval_decimal} ${session.token.symbol} in total over the next ${plural(session.approval_periods, session.period)}. Nothing else is needed from you.`,
      };
    case "connect":
      return {
        ...common,
        stage: "connect",
        focus: "title",
        title,
        lead,
        status: "Review the terms, then connect your wallet.",
        action: { kind: "connect", label: "Connect wallet" },
        usesWallet: true,
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
        usesWallet: true,
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
      return { ...common, ...cards.errorCard(phase.error), title, lead, usesWallet: true };
  }
};
