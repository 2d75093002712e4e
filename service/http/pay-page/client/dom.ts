/** Renders a view model into the page: builds the card once, then updates it in place. */
import { cardNotice } from "../../hosted-page/client/card-notice.ts";
import { element, show } from "../../hosted-page/client/element.ts";
import { qrElement } from "./qr.ts";
import type { Action, ViewModel } from "./view-model.ts";

export interface View {
  render(model: ViewModel): void;
}

/** How long "Copied" shows on the copy button. */
const COPIED_MS = 2000;

/** Copies `text`: the Clipboard API, else the selected text with the older copy command. */
const copyText = async (text: string, fallbackNode: HTMLElement): Promise<boolean> => {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    const selection = window.getSelection();
    const range = document.createRange();
    range.selectNodeContents(fallbackNode);
    selection?.removeAllRanges();
    selection?.addRange(range);
    return document.execCommand("copy");
  }
};

export const mountView = (root: HTMLElement, onAction: (action: Action) => void): View => {
  const mark = element("span", { class: "merchant-mark", "aria-hidden": "true" });
  const merchant = element("span", { class: "merchant-name" });
  const badge = element("span", { class: "badge" });
  const title = element("h1", { id: "title", tabindex: "-1" });
  const lead = element("p", { class: "lead" });
  const amount = element("p", { class: "amount-due", id: "amount" });
  const summary = element("dl", { class: "summary" });
  const expiry = element("p", { class: "expiry", id: "expiry" });
  const qr = element("div", { class: "qr", id: "qr" });
  const depositLabel = element("p", { class: "deposit-label", id: "deposit-label" });
  const address = element("code", { class: "address", id: "address" });
  const copy = element("button", {
    type: "button",
    class: "button button-secondary button-small",
    id: "copy",
  });
  const deposit = element(
    "section",
    { class: "deposit", "aria-labelledby": "deposit-label" },
    qr,
    element("div", { class: "deposit-text" }, depositLabel, address, copy),
  );
  const notice = cardNotice<Action>(title, onAction);
  const hint = element("p", { class: "hint", id: "hint" });
  const secondary = element("button", { type: "button", class: "button button-secondary", id: "secondary" });
  const footer = element("p", { class: "footer" });
  let secondaryAction: Action | null = null;
  let qrUri: string | null = null;
  let copiedTimer: ReturnType<typeof setTimeout> | undefined;

  secondary.addEventListener("click", () => {
    if (secondaryAction !== null) onAction(secondaryAction);
  });
  copy.addEventListener("click", () => {
    void copyText(address.textContent ?? "", address).then((copied) => {
      copy.textContent = copied ? "Copied" : "Select the address to copy it";
      clearTimeout(copiedTimer);
      copiedTimer = setTimeout(() => {
        copy.textContent = "Copy address";
      }, COPIED_MS);
    });
  });
  copy.textContent = "Copy address";

  const card = element(
    "div",
    { class: "card" },
    element("header", { class: "card-header" }, mark, merchant, badge),
    title,
    lead,
    amount,
    summary,
    expiry,
    deposit,
    notice.alert,
    notice.status,
    notice.countdown,
    notice.button,
    hint,
    secondary,
    footer,
  );
  root.replaceChildren(card);

  const renderQr = (uri: string, label: string) => {
    if (uri === qrUri) return;
    qrUri = uri;
    void qrElement(uri, label).then(
      (svg) => {
        if (qrUri === uri) qr.replaceChildren(svg);
      },
      () => {
        if (qrUri === uri) qr.replaceChildren(element("p", { class: "qr-missing" }, "QR code unavailable"));
      },
    );
  };

  return {
    render(model) {
      show(merchant, model.merchant);
      show(mark, model.merchant === null ? null : (model.merchant.trim()[0] ?? "").toUpperCase());
      show(badge, model.badge);
      title.textContent = model.title;
      document.title = model.title;
      show(lead, model.lead);
      show(amount, model.amount);

      summary.replaceChildren(
        ...model.summary.map((row) =>
          element(
            "div",
            { class: "summary-row" },
            element("dt", {}, row.label),
            element("dd", {}, row.value),
          ),
        ),
      );
      summary.hidden = model.summary.length === 0;
      show(expiry, model.expiry);

      deposit.hidden = model.deposit === null;
      if (model.deposit !== null) {
        depositLabel.textContent = model.deposit.label;
        address.textContent = model.deposit.address;
        renderQr(model.deposit.uri, `QR code: ${model.deposit.label}, ${model.deposit.address}`);
      }

      notice.render(model);
      show(hint, model.hint);
      secondaryAction = model.secondary?.kind ?? null;
      secondary.hidden = model.secondary === null;
      secondary.textContent = model.secondary?.label ?? "";
      root.setAttribute("aria-busy", String(model.stage === "loading"));
      card.dataset.stage = model.stage.split(":")[0] ?? "";
      show(footer, model.footer);

      notice.moveFocus(model);
    },
  };
};
