/** Renders a view model into the page: builds the card once, then updates it in place. */
import { cardNotice } from "../../hosted-page/client/card-notice.ts";
import { element, show } from "../../hosted-page/client/element.ts";
import type { Action, ViewModel } from "./view-model.ts";

const STATUS_WORDS = {
  todo: "to do",
  active: "in progress",
  done: "done",
  skipped: "not needed",
  failed: "failed",
};

export interface View {
  render(model: ViewModel): void;
}

export const mountView = (root: HTMLElement, onAction: (action: Action) => void): View => {
  const mark = element("span", { class: "merchant-mark", "aria-hidden": "true" });
  const merchant = element("span", { class: "merchant-name" });
  const badge = element("span", { class: "badge" });
  const title = element("h1", { id: "title", tabindex: "-1" });
  const lead = element("p", { class: "lead" });
  const summary = element("dl", { class: "summary" });
  const steps = element("ol", { class: "steps", "aria-label": "Progress" });
  const notice = cardNotice<Action>(title, onAction);
  const footer = element("p", { class: "footer" });

  const card = element(
    "div",
    { class: "card" },
    element("header", { class: "card-header" }, mark, merchant, badge),
    title,
    lead,
    summary,
    steps,
    notice.alert,
    notice.status,
    notice.countdown,
    notice.button,
    footer,
  );
  root.replaceChildren(card);

  return {
    render(model) {
      const merchantRow = model.summary.find((row) => row.label === "Merchant");
      show(merchant, merchantRow?.value ?? null);
      show(mark, merchantRow ? (merchantRow.value.trim()[0] ?? "").toUpperCase() : null);
      show(badge, model.badge);
      title.textContent = model.title;
      document.title = model.title;
      show(lead, model.lead);

      summary.replaceChildren(
        ...model.summary
          .filter((row) => row.label !== "Merchant")
          .map((row) =>
            element(
              "div",
              { class: "summary-row" },
              element("dt", {}, row.label),
              element("dd", {}, row.value),
            ),
          ),
      );
      summary.hidden = model.summary.length === 0;

      steps.replaceChildren(
        ...model.steps.map((step) =>
          element(
            "li",
            {
              class: `step step-${step.status}`,
              ...(step.status === "active" ? { "aria-current": "step" } : {}),
            },
            element("span", { class: "step-icon", "aria-hidden": "true" }),
            element("span", { class: "step-label" }, step.label),
            element("span", { class: "visually-hidden" }, ` (${STATUS_WORDS[step.status]})`),
          ),
        ),
      );
      steps.hidden = model.steps.length === 0;

      notice.render(model);
      root.setAttribute("aria-busy", String(model.stage === "loading"));
      card.dataset.stage = model.stage.split(":")[0] ?? "";
      show(footer, model.footer);

      notice.moveFocus(model);
    },
  };
};
