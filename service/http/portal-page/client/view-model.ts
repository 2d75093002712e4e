/** What the portal shows for a state: pure, so wording and focus rules are unit-tested without a DOM. */
import * as cards from "../../hosted-page/client/card-model.ts";
import {
  amountText,
  capText,
  chargeText,
  dateText,
  MANDATE_STATUS_WORDS,
  SUBSCRIPTION_STATUS_WORDS,
  shortAddress,
} from "./format.ts";
import type { State, Step } from "./state.ts";
import type { Mandate, Session, Subscription } from "./types.ts";

export type Action =
  | "retry"
  | "keep_open"
  | "dismiss"
  | `cancel:${string}`
  | `confirm_cancel:${string}`
  | `revoke:${string}`
  | `confirm_revoke:${string}`;

export interface ItemButton {
  readonly action: Action;
  readonly label: string;
  readonly style: "secondary" | "danger";
}

/** One mandate, with the subscription that charges it if any. */
export interface ItemModel {
  readonly id: string;
  readonly title: string;
  readonly status: string;
  readonly rows: ReadonlyArray<cards.SummaryRow>;
  /** The latest charges: date and what happened. */
  readonly charges: ReadonlyArray<cards.SummaryRow>;
  /** "Review and sign" on the mandate's authorization page. */
  readonly signLink: { readonly href: string; readonly label: string } | null;
  /** The question waiting for the customer's confirmation, with its buttons. */
  readonly question: string | null;
  readonly buttons: ReadonlyArray<ItemButton>;
}

export interface ViewModel extends cards.CardModel<Action> {
  readonly items: ReadonlyArray<ItemModel>;
  /** Shown when the customer has nothing left to manage. */
  readonly empty: string | null;
  readonly returnLink: { readonly href: string; readonly label: string } | null;
}

const opening = cards.pageCards("Your payments", "Link");
const base = { ...opening.blank, items: [], empty: null, returnLink: null } as const;

const notFound: ViewModel = {
  ...base,
  ...opening.notFound,
  title: "Link not valid",
  lead: "This link is not valid or has expired (links work for an hour). Return to the merchant's site and open it again.",
  status: "Link not valid or expired.",
};

const subscriptionRows = (subscription: Subscription, mandate: Mandate) => {
  const rows = [
    { label: "Price", value: `${amountText(subscription.amount_decimal, subscription.token)} per month` },
  ];
  if (subscription.ends_at !== null) rows.push({ label: "Ends", value: dateText(subscription.ends_at) });
  if (subscription.next_charge !== null)
    rows.push({
      label: "Next charge",
      value: `${amountText(subscription.next_charge.amount_decimal, subscription.token)} on ${dateText(subscription.next_charge.at)}`,
    });
  rows.push({ label: "Authorized", value: capText(mandate) });
  return rows;
};

const mandateRows = (mandate: Mandate) => {
  const rows = [{ label: "Authorized", value: capText(mandate) }];
  if (mandate.approval_left_decimal !== null)
    rows.push({
      label: "Approval left",
      value: amountText(mandate.approval_left_decimal, mandate.token.symbol),
    });
  return rows;
};

const itemOf = (state: State, session: Session, mandate: Mandate): ItemModel => {
  const subscription = session.subscriptions.find((s) => s.mandate === mandate.id) ?? null;
  const rows = subscription === null ? mandateRows(mandate) : subscriptionRows(subscription, mandate);
  rows.push({ label: "Network", value: mandate.chain.name });
  if (mandate.customer_address !== null)
    rows.push({ label: "Wallet", value: shortAddress(mandate.customer_address) });
  const held = mandate.holds.map((hold) => amountText(hold.amount_decimal, mandate.token.symbol));
  if (held.length > 0) rows.push({ label: "Held in escrow", value: held.join(", ") });

  const pending = state.phase.tag === "confirm" ? state.phase.pending : null;
  const cancelAsked = pending?.kind === "cancel" && pending.id === subscription?.id ? subscription : null;
  const revokeAsked = pending?.kind === "revoke" && pending.id === mandate.id;
  const buttons: ItemButton[] = [];
  if (cancelAsked !== null)
    buttons.push(
      { action: `confirm_cancel:${cancelAsked.id}`, label: "Yes, cancel", style: "danger" },
      { action: "dismiss", label: "Keep it", style: "secondary" },
    );
  else if (revokeAsked)
    buttons.push(
      { action: `confirm_revoke:${mandate.id}`, label: "Sign to revoke", style: "danger" },
      { action: "dismiss", label: "Keep it", style: "secondary" },
    );
  else {
    if (subscription?.cancelable && subscription.status !== "incomplete")
      buttons.push({ action: `cancel:${subscription.id}`, label: "Cancel subscription", style: "secondary" });
    if (mandate.revocable)
      buttons.push({ action: `revoke:${mandate.id}`, label: "Revoke", style: "secondary" });
  }
  const question =
    cancelAsked !== null
      ? `Cancel ${cancelAsked.product_name}? It stays active until ${dateText(cancelAsked.current_period?.end ?? cancelAsked.next_charge?.at ?? 0)} and is not charged again.`
      : revokeAsked
        ? `Revoke this authorization? ${session.merchant.name} can then no longer collect from your wallet with it${subscription === null ? "" : `, and your ${subscription.product_name} subscription ends`}. Your wallet signs a message: no transaction, no gas.`
        : null;

  return {
    id: mandate.id,
    title: subscription?.product_name ?? `Payments to ${session.merchant.name}`,
    status:
      subscription === null
        ? MANDATE_STATUS_WORDS[mandate.status]
        : SUBSCRIPTION_STATUS_WORDS[subscription.status],
    rows,
    charges: mandate.recent_charges.map((charge) => ({
      label: dateText(charge.charged_at ?? charge.created),
      value: chargeText(mandate, charge),
    })),
    signLink: mandate.signature_wanted ? { href: mandate.authorization_url, label: "Review and sign" } : null,
    question,
    buttons,
  };
};

const progressText = (session: Session, target: string | null, step: Step): string => {
  const chain = session.mandates.find((m) => m.id === target)?.chain;
  switch (step) {
    case "cancel":
      return "Canceling…";
    case "sign_revocation":
      return "Sign the revocation in your wallet. It costs no gas.";
    case "submit_revocation":
      return "Submitting your revocation…";
    case "confirm_revocation":
      return `Waiting for confirmation on ${chain?.name ?? "the network"}…`;
    default:
      return (chain === undefined ? null : cards.walletProgress(step, chain)) ?? "Working…";
  }
};

/** The action under way (or asked, or failed) is a revocation: it uses the wallet. */
const revoking = (state: State) => state.target?.startsWith("mdt_") ?? false;

export const viewModel = (state: State): ViewModel => {
  const { phase, session } = state;
  if (phase.tag === "not_found") return notFound;
  if (session === null)
    return phase.tag === "load_error"
      ? { ...base, ...opening.loadError(phase.error) }
      : { ...base, ...opening.loading };

  const items = session.mandates.map((mandate) => itemOf(state, session, mandate));
  const common = {
    ...base,
    badge: session.livemode ? null : "Test mode",
    merchant: session.merchant.name,
    title: `Your payments to ${session.merchant.name}`,
    lead: `What you authorized ${session.merchant.name} to collect from your wallet, and what it collected.`,
    items,
    empty: items.length === 0 ? `You have no active payments with ${session.merchant.name}.` : null,
    returnLink:
      session.return_url === null
        ? null
        : { href: session.return_url, label: `Return to ${session.merchant.name}` },
    footer:
      "Canceling a subscription ends it at the end of the period you paid for; nothing is refunded or charged. Revoking an authorization ends it on chain for good.",
  };
  switch (phase.tag) {
    case "loading":
    case "load_error":
    case "open":
      return {
        ...common,
        stage: state.notice === null ? "open" : `notice:${state.notice}`,
        focus: "title",
        status: state.notice ?? "",
        statusVisible: state.notice !== null,
      };
    case "confirm":
      return {
        ...common,
        stage: `confirm:${phase.pending.kind}:${phase.pending.id}`,
        focus: "title",
        status: "Confirm below, or keep it.",
        usesWallet: phase.pending.kind === "revoke",
        statusVisible: false,
      };
    case "busy":
      return {
        ...common,
        stage: `busy:${phase.step}`,
        focus: "title",
        status: progressText(session, state.target, phase.step),
        busy: true,
        usesWallet: revoking(state),
      };
    case "error":
      return { ...common, ...cards.errorCard(phase.error), usesWallet: revoking(state) };
  }
};
