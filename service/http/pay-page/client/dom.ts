/** Renders a view model into the page: builds the card once, then updates it in place. */
import { element } from "../../hosted-page/client/element.ts";
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
  const errorTitle = element("h2", { class: "error-title" });
  const errorMessage = element("p", { class: "error-message" });
  const error = element("div", { class: "error", id: "error", tabindex: "-1" }, errorTitle, errorMessage);
  const alert = element("div", { role: "alert", class: "alert-region" }, error);
  const status = element("p", { class: "status", id: "status", role: "status", "aria-live": "polite" });
  const countdown = element("p", { class: "countdown", id: "countdown" });
  const button = element("button", { type: "button", class: "button", id: "action" });
  const hint = element("p", { class: "hint", id: "hint" });
  const secondary = element("button", { type: "button", class: "button button-secondary", id: "secondary" });
  const footer = element("p", { class: "footer" });
  let action: Action | null = null;
  let secondaryAction: Action | null = null;
  let stage: string | null = null;
  let qrUri: string | null = null;
  let copiedTimer: ReturnType<typeof setTimeout> | undefined;

  button.addEventListener("click", () => {
    if (action !== null) onAction(action);
  });
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
    alert,
    status,
    countdown,
    button,
    hint,
    secondary,
    footer,
  );
  root.replaceChildren(card);

  const show = (node: HTMLElement, text: string | null) => {
    node.textContent = text ?? "";
    node.hidden = text === null || text === "";
  };

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

      error.hidden = model.error === null;
      errorTitle.textContent = model.error?.title ?? "";
      errorMessage.textContent = model.error?.message ?? "";

      // Errors are announced by the alert; the status region carries progress only.
      status.textContent = model.error === null ? model.status : "";
      status.classList.toggle("status-busy", model.busy);
      status.hidden = model.error !== null;
      status.classList.toggle("visually-hidden", !model.statusVisible);
      show(countdown, model.countdown);

      action = model.action?.kind ?? null;
      button.hidden = model.action === null;
      button.textContent = model.action?.label ?? "";
      button.className = model.action?.kind === "keep_open" ? "button button-secondary" : "button";
      show(hint, model.hint);
      secondaryAction = model.secondary?.kind ?? null;
      secondary.hidden = model.secondary === null;
      secondary.textContent = model.secondary?.label ?? "";
      root.setAttribute("aria-busy", String(model.stage === "loading"));
      card.dataset.stage = model.stage.split(":")[0] ?? "";
      show(footer, model.footer);

      if (model.stage !== stage) {
        const first = stage === null || stage === "loading";
        stage = model.stage;
        // On arrival only an error or an urgent action (the closing countdown) takes the focus.
        if (!first || model.focus !== "title") {
          const target =
            model.focus === "error" && model.error !== null
              ? error
              : model.focus === "action" && model.action !== null
                ? button
                : title;
          target.focus();
        }
      }
    },
  };
};
