/**
 * A hosted page's card: the merchant's header, title, lead, summary, the notice (error, status,
 * countdown, main action), the wallets and the footer. Each page puts its own elements in the slots
 * and renders them; built once, updated in place.
 */
import type { CardModel } from "./card-model.ts";
import { cardNotice } from "./card-notice.ts";
import { element, rebuild, setText, show } from "./element.ts";
import type { WalletChoice } from "./page-flow.ts";
import { type WalletHandlers, walletPicker } from "./wallet-picker.ts";

export interface CardHandlers<A extends string> {
  readonly onAction: (action: A) => void;
  readonly wallet: WalletHandlers;
}

export interface CardSlots {
  readonly afterLead?: readonly Node[];
  readonly afterSummary?: readonly Node[];
  /** Beside the main action; hidden with it while the customer picks a wallet. */
  readonly actions?: readonly Node[];
}

export interface View<M> {
  render(model: M, wallets: WalletChoice): void;
}

export const mountCard = <A extends string>(
  root: HTMLElement,
  handlers: CardHandlers<A>,
  slots: CardSlots = {},
): View<CardModel<A>> => {
  const mark = element("span", { class: "merchant-mark", "aria-hidden": "true" });
  const merchant = element("span", { class: "merchant-name" });
  const badge = element("span", { class: "badge" });
  const title = element("h1", { id: "title", tabindex: "-1" });
  const lead = element("p", { class: "lead" });
  const summary = element("dl", { class: "summary" });
  const notice = cardNotice<A>(title, handlers.onAction);
  // Cancelling the picker gives the focus back to the action it interrupted.
  const wallets = walletPicker(handlers.wallet, () => notice.button.focus());
  const actions = element("div", { class: "actions" }, notice.button, ...(slots.actions ?? []));
  const footer = element("p", { class: "footer" });

  const card = element(
    "div",
    { class: "card" },
    element("header", { class: "card-header" }, mark, merchant, badge),
    title,
    lead,
    ...(slots.afterLead ?? []),
    summary,
    ...(slots.afterSummary ?? []),
    notice.alert,
    notice.status,
    notice.countdown,
    wallets.chooser,
    actions,
    wallets.current,
    footer,
  );
  root.replaceChildren(card);

  return {
    render(model, choice) {
      show(merchant, model.merchant);
      show(mark, model.merchant === null ? null : (model.merchant.trim()[0] ?? "").toUpperCase());
      show(badge, model.badge);
      setText(title, model.title);
      if (document.title !== model.title) document.title = model.title;
      show(lead, model.lead);

      rebuild(summary, model.summary, (row) =>
        element("div", { class: "summary-row" }, element("dt", {}, row.label), element("dd", {}, row.value)),
      );
      summary.hidden = model.summary.length === 0;

      // The picker only while the page's action uses the wallet (a payment that arrived meanwhile ends it).
      const picking = choice.picking && model.usesWallet;
      notice.render(
        picking
          ? { ...model, status: "Choose the wallet to use.", busy: false, statusVisible: false }
          : model,
      );
      actions.hidden = picking;
      wallets.render({ ...choice, picking }, model.usesWallet && !model.busy);
      root.setAttribute("aria-busy", String(model.stage === "loading"));
      card.dataset.stage = model.stage.split(":")[0] ?? "";
      show(footer, model.footer);

      notice.moveFocus(model);
    },
  };
};
