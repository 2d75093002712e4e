/**
 * Renders a view model into the page: the shared card, with the amount, the expiry, the deposit
 * address with its QR code and copy button, and the second way to pay.
 */
import { type CardHandlers, mountCard, type View } from "../../hosted-page/client/card.ts";
import { element, setText, show } from "../../hosted-page/client/element.ts";
import { qrElement } from "./qr.ts";
import type { Action, ViewModel } from "./view-model.ts";

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

export const mountView = (root: HTMLElement, handlers: CardHandlers<Action>): View<ViewModel> => {
  const amount = element("p", { class: "amount-due", id: "amount" });
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
  const hint = element("p", { class: "hint", id: "hint" });
  const secondary = element("button", { type: "button", class: "button button-secondary", id: "secondary" });
  let secondaryAction: Action | null = null;
  let qrUri: string | null = null;
  let copiedTimer: ReturnType<typeof setTimeout> | undefined;

  secondary.addEventListener("click", () => {
    if (secondaryAction !== null) handlers.onAction(secondaryAction);
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

  const card = mountCard<Action>(root, handlers, {
    afterLead: [amount],
    afterSummary: [expiry, deposit],
    actions: [hint, secondary],
  });

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
    render(model, wallets) {
      show(amount, model.amount);
      show(expiry, model.expiry);
      deposit.hidden = model.deposit === null;
      if (model.deposit !== null) {
        setText(depositLabel, model.deposit.label);
        setText(address, model.deposit.address);
        renderQr(model.deposit.uri, `QR code: ${model.deposit.label}, ${model.deposit.address}`);
      }
      show(hint, model.hint);
      secondaryAction = model.secondary?.kind ?? null;
      secondary.hidden = model.secondary === null;
      setText(secondary, model.secondary?.label ?? "");
      card.render(model, wallets);
    },
  };
};
