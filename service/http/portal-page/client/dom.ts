/**
 * Renders a view model into the page: the shared card, with the customer's payments as a list of
 * sections (each with its rows, latest charges, sign link and buttons) and the return link.
 */
import { type CardHandlers, mountCard, type View } from "../../hosted-page/client/card.ts";
import { element, rebuild, show } from "../../hosted-page/client/element.ts";
import type { Action, ItemModel, ViewModel } from "./view-model.ts";

const rowsOf = (rows: ItemModel["rows"], className: string) =>
  element(
    "dl",
    { class: className },
    ...rows.map((row) =>
      element("div", { class: "summary-row" }, element("dt", {}, row.label), element("dd", {}, row.value)),
    ),
  );

export const mountView = (root: HTMLElement, handlers: CardHandlers<Action>): View<ViewModel> => {
  const list = element("div", { class: "portal-items" });
  const empty = element("p", { class: "portal-empty" });
  const back = element("a", { class: "portal-return" });
  const card = mountCard<Action>(root, handlers, { afterSummary: [list, empty] });
  root.querySelector(".card")?.append(back);
  let question: string | null = null;

  const item = (model: ItemModel) => {
    const headingId = `item-${model.id}`;
    const parts: Node[] = [
      element(
        "header",
        { class: "portal-item-header" },
        element("h2", { id: headingId }, model.title),
        element("span", { class: "portal-item-status" }, model.status),
      ),
      rowsOf(model.rows, "summary"),
    ];
    if (model.charges.length > 0)
      parts.push(element("h3", {}, "Latest charges"), rowsOf(model.charges, "summary portal-charges"));
    if (model.question !== null)
      parts.push(element("p", { class: "portal-question", role: "alert" }, model.question));
    const actions = element("div", { class: "portal-actions" });
    if (model.signLink !== null)
      actions.append(element("a", { class: "button", href: model.signLink.href }, model.signLink.label));
    for (const button of model.buttons) {
      const node = element(
        "button",
        { type: "button", class: `button button-${button.style}`, "data-action": button.action },
        button.label,
      );
      node.addEventListener("click", () => handlers.onAction(button.action));
      actions.append(node);
    }
    if (actions.childElementCount > 0) parts.push(actions);
    return element("section", { class: "portal-item", "aria-labelledby": headingId }, ...parts);
  };

  return {
    render(model, wallets) {
      rebuild(list, model.items, item);
      show(empty, model.empty);
      back.hidden = model.returnLink === null;
      if (model.returnLink !== null) {
        back.setAttribute("href", model.returnLink.href);
        if (back.textContent !== model.returnLink.label) back.textContent = model.returnLink.label;
      }
      card.render(model, wallets);
      // A question takes the focus to its first answer; its answer gives it back to the card.
      const asked = model.items.find((i) => i.question !== null)?.question ?? null;
      if (asked !== null && asked !== question)
        list.querySelector<HTMLElement>(".portal-question ~ .portal-actions button")?.focus();
      question = asked;
    },
  };
};
