/** What the pay page shows for a state: pure, so wording and focus rules are unit-tested without a DOM. */
import * as cards from "../../hosted-page/client/card-model.ts";
import { isZero, money, shortAddress, timeLeftText } from "./format.ts";
import { type PayStatus, payStatus, type State, type Step, secondsLeft, takesPayment } from "./state.ts";
import type { Session } from "./types.ts";

export type Action = "pay_gasless" | "pay_transfer" | "retry" | "keep_open";

export interface ViewModel extends cards.CardModel<Action> {
  /** The amount still to send, large. */
  readonly amount: string | null;
  /** "Expires in 14:59", while the payment takes payments. */
  readonly expiry: string | null;
  /** The deposit address with its QR code (an EIP-681 link), while something is left to send. */
  readonly deposit: { readonly address: string; readonly uri: string; readonly label: string } | null;
  readonly secondary: { readonly kind: Action; readonly label: string } | null;
  readonly hint: string | null;
}

const opening = cards.pageCards("Pay", "Payment");
const base = {
  ...opening.blank,
  amount: null,
  expiry: null,
  deposit: null,
  secondary: null,
  hint: null,
} as const;

const merchantOf = (session: Session) => session.merchant.name || "the merchant";

const summaryOf = (session: Session) => {
  const rows: Array<{ label: string; value: string }> = [];
  if (session.description) rows.push({ label: "For", value: session.description });
  rows.push({ label: "Amount", value: money(session.amount_decimal, session) });
  if (!isZero(session.amount_received_decimal))
    rows.push({ label: "Received", value: money(session.amount_received_decimal, session) });
  if (!isZero(session.amount_pending_decimal))
    rows.push({ label: "Not yet confirmed", value: money(session.amount_pending_decimal, session) });
  if (!isZero(session.amount_overpaid_decimal))
    rows.push({ label: "Overpaid", value: money(session.amount_overpaid_decimal, session) });
  rows.push({ label: "Token", value: `${session.token.symbol} · ${shortAddress(session.token.address)}` });
  rows.push({ label: "Network", value: session.chain.name });
  return rows;
};

const progressText = (session: Session, step: Step): string => {
  switch (step) {
    case "sign":
      return `Sign the payment of ${money(session.amount_remaining_decimal, session)} in your wallet. It costs you no gas.`;
    case "submit":
      return "Sending your payment…";
    case "send":
      return `Confirm the transfer of ${money(session.amount_remaining_decimal, session)} in your wallet.`;
    case "mining":
      return `Waiting for your transfer to be mined on ${session.chain.name}…`;
    default:
      return cards.walletProgress(step, session.chain) ?? "Working…";
  }
};

const expiryText = (state: State): string | null => {
  const left = secondsLeft(state);
  if (left === null) return null;
  const text = timeLeftText(left);
  return text === null ? "Time is up: this payment is expiring." : `Expires in ${text}`;
};

const closedText = (session: Session, status: PayStatus) => {
  const merchant = merchantOf(session);
  switch (status) {
    case "underpaid":
      return {
        title: "Payment incomplete",
        lead: `This payment expired with ${money(session.amount_received_decimal, session)} of ${money(session.amount_decimal, session)} received. Contact ${merchant} about the rest; don't send more to this address.`,
      };
    case "canceled":
      return {
        title: "Payment canceled",
        lead: `${merchant} canceled this payment. Don't send anything to its address.`,
      };
    case "reversed":
      return {
        title: "Payment reversed",
        lead: `This payment's funds were returned. Contact ${merchant} if you still want to pay.`,
      };
    default:
      return {
        title: "Payment expired",
        lead: `This payment expired before anything arrived. Don't send anything to its address; ask ${merchant} for a new payment link.`,
      };
  }
};

const loading: ViewModel = { ...base, ...opening.loading };

export const viewModel = (state: State): ViewModel => {
  const { phase, session } = state;
  if (
    phase.tag === "not_found" ||
    (session === null && phase.tag !== "loading" && phase.tag !== "load_error")
  )
    return { ...base, ...opening.notFound };
  if (session === null)
    return phase.tag === "load_error" ? { ...base, ...opening.loadError(phase.error) } : loading;

  const status = payStatus(session);
  const merchant = merchantOf(session);
  const remaining = money(session.amount_remaining_decimal, session);
  const common = {
    ...base,
    badge: session.livemode ? null : "Test mode",
    merchant: session.merchant.name || null,
    summary: summaryOf(session),
    footer: `Send only ${session.token.symbol} on ${session.chain.name} to this payment's address.`,
  };

  if (phase.tag === "loading") return loading;
  if (phase.tag === "done") {
    const overpaid = isZero(session.amount_overpaid_decimal)
      ? ""
      : ` You sent ${money(session.amount_overpaid_decimal, session)} more than the amount; contact ${merchant} about the difference.`;
    return {
      ...common,
      ...cards.doneCard(phase, state.closeDelay, `Paid: your payment is confirmed on ${session.chain.name}.`),
      title: "Payment received",
      lead: `${merchant} received ${money(session.amount_decimal, session)}. Thank you!${overpaid}`,
      footer: null,
    };
  }
  if (phase.tag === "closed" || !(takesPayment(status) || status === "confirming")) {
    const text = closedText(session, status);
    return {
      ...common,
      stage: `closed:${status}`,
      focus: "title",
      ...text,
      status: `${text.title}.`,
      footer: null,
    };
  }

  const deposit =
    takesPayment(status) && session.payment_uri !== null
      ? {
          address: session.address,
          uri: session.payment_uri,
          label: `Send ${remaining} on ${session.chain.name} to this address`,
        }
      : null;
  const open = {
    ...common,
    amount: takesPayment(status) ? remaining : null,
    expiry: expiryText(state),
    deposit,
  };
  const title = status === "partly_received" ? "Partly received" : `Pay ${merchant}`;
  const lead =
    status === "partly_received"
      ? `Part of the payment arrived. Send the remaining ${remaining} to finish.`
      : `Send ${money(session.amount_decimal, session)}: scan the QR code with a wallet app, copy the address, or pay with your browser wallet.`;

  if (status === "confirming")
    return {
      ...open,
      stage: "confirming",
      focus: "title",
      title: "Confirming your payment",
      lead: `Everything due arrived. Waiting for confirmation on ${session.chain.name}…`,
      status: `Confirming your payment on ${session.chain.name}…`,
      busy: true,
    };
  if (phase.tag === "busy")
    return {
      ...open,
      stage: `busy:${phase.step}`,
      focus: "title",
      title,
      lead,
      status: progressText(session, phase.step),
      busy: true,
    };
  if (state.sent !== null)
    return {
      ...open,
      stage: "sent",
      focus: "title",
      title,
      lead,
      status: "Payment sent. Waiting for it to arrive…",
      busy: true,
    };

  const payWith = (kind: Action) => ({ kind, label: `Pay ${remaining} with your wallet` });
  const alternative =
    session.gasless === null
      ? null
      : { kind: "pay_transfer" as const, label: "Send a wallet transaction instead" };
  const hint =
    session.gasless === null
      ? `Your wallet sends the transfer and pays its gas in ${session.chain.native_currency.symbol}.`
      : "No gas needed: you sign, and the payment service sends it.";
  const statusLine =
    status === "partly_received" ? `Partly received: ${remaining} left to pay.` : "Waiting for your payment.";

  if (phase.tag === "error")
    return {
      ...open,
      ...cards.errorCard(phase.error),
      title,
      lead,
      secondary: phase.error.retry === "pay_transfer" ? null : alternative,
      usesWallet: true,
    };
  return {
    ...open,
    stage: `open:${status}`,
    focus: "title",
    title,
    lead,
    status: statusLine,
    action: payWith(session.gasless === null ? "pay_transfer" : "pay_gasless"),
    secondary: alternative,
    hint,
    usesWallet: true,
  };
};
