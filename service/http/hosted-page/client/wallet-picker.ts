/**
 * The wallets on the card: the picker (one button per installed wallet, its icon and name) shown when
 * the customer must choose, and the line naming the wallet in use with "Use another wallet". Names are
 * text and icons `<img>`s of data images only, never markup.
 */
import { element } from "./element.ts";
import type { WalletChoice } from "./page-flow.ts";
import { safeIcon, type WalletInfo } from "./wallets.ts";

export interface WalletHandlers {
  readonly choose: (uuid: string) => void;
  readonly change: () => void;
  readonly cancel: () => void;
}

const icon = (info: WalletInfo): HTMLElement => {
  const src = safeIcon(info.icon);
  if (src !== null)
    return element("img", {
      class: "wallet-icon",
      src,
      alt: "",
      width: "28",
      height: "28",
      decoding: "async",
    });
  // The initial is drawn by CSS, so the button's text stays the wallet's name alone.
  const initial = (/[\p{L}\p{N}]/u.exec(info.name)?.[0] ?? "?").toUpperCase();
  return element("span", {
    class: "wallet-icon wallet-icon-blank",
    "data-initial": initial,
    "aria-hidden": "true",
  });
};

export const walletPicker = (handlers: WalletHandlers, onCancel: () => void) => {
  const heading = element("h2", { class: "wallet-picker-title", id: "wallet-picker-title", tabindex: "-1" });
  heading.textContent = "Choose a wallet";
  const lead = element(
    "p",
    { class: "wallet-picker-lead" },
    "Several wallets are installed in this browser. Pick the one to use here.",
  );
  const list = element("ul", { class: "wallet-list", "aria-labelledby": "wallet-picker-title" });
  const cancel = element("button", { type: "button", class: "button button-secondary", id: "wallet-cancel" });
  cancel.textContent = "Cancel";
  cancel.addEventListener("click", () => {
    handlers.cancel();
    onCancel();
  });
  const chooser = element(
    "section",
    { class: "wallet-picker", id: "wallet-picker", "aria-labelledby": "wallet-picker-title" },
    heading,
    lead,
    list,
    cancel,
  );

  const currentIcon = element("span", { class: "wallet-current-icon" });
  const currentName = element("span", { class: "wallet-current-name" });
  const change = element("button", { type: "button", class: "link-button", id: "wallet-change" });
  change.textContent = "Use another wallet";
  change.addEventListener("click", () => handlers.change());
  const current = element(
    "p",
    { class: "wallet-current", id: "wallet-current" },
    currentIcon,
    currentName,
    change,
  );

  // One item per wallet, kept while it is listed: a wallet announcing itself late is added without
  // rebuilding the others (which would take the focus from the option the customer is on).
  const items = new Map<string, HTMLLIElement>();
  let shownCurrent: string | null = null;
  let wasPicking = false;

  const renderOptions = (options: readonly WalletInfo[]) => {
    const uuids = new Set(options.map((info) => info.uuid));
    for (const [uuid, item] of items)
      if (!uuids.has(uuid)) {
        item.remove();
        items.delete(uuid);
      }
    for (const info of options) {
      if (items.has(info.uuid)) continue;
      const name = element("span", { class: "wallet-name" });
      name.textContent = info.name;
      const button = element("button", { type: "button", class: "wallet-option" }, icon(info), name);
      button.addEventListener("click", () => handlers.choose(info.uuid));
      const item = element("li", {}, button);
      items.set(info.uuid, item);
      list.append(item);
    }
  };

  return {
    chooser,
    current,
    /** `offerChange`: the page's action uses the wallet, so changing it now makes sense. */
    render(choice: WalletChoice, offerChange: boolean): void {
      chooser.hidden = !choice.picking;
      renderOptions(choice.options);
      const named = choice.current;
      current.hidden = choice.picking || named === null || !offerChange || choice.options.length < 2;
      if (named !== null && named.uuid !== shownCurrent) {
        shownCurrent = named.uuid;
        currentIcon.replaceChildren(icon(named));
        currentName.textContent = `Wallet: ${named.name}`;
      }
      if (choice.picking && !wasPicking) {
        const first = list.querySelector("button");
        (first ?? heading).focus();
      }
      wasPicking = choice.picking;
    },
  };
};
