/** Renders a view model into the page: builds the card once, then updates it in place. */
import { element } from "../../hosted-page/client/element.ts";
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
  const errorTitle = element("h2", { class: "error-title" });
  const errorMessage = element("p", { class: "error-message" });
  const error = element("div", { class: "error", id: "error", tabindex: "-1" }, errorTitle, errorMessage);
  const alert = element("div", { role: "alert", class: "alert-region" }, error);
  const status = element("p", { class: "status", id: "status", role: "status", "aria-live": "polite" });
  const countdown = element("p", { class: "countdown", id: "countdown" });
  const button = element("button", { type: "button", class: "button", id: "action" });
  const footer = element("p", { class: "footer" });
  let action: Action | null = null;
  let stage: string | null = null;

  button.addEventListener("click", () => {
    if (action !== null) onAction(action);
  });

  const card = element(
    "div",
    { class: "card" },
    element("header", { class: "card-header" }, mark, merchant, badge),
    title,
    lead,
    summary,
    steps,
    alert,
    status,
    countdown,
    button,
    footer,
  );
  root.replaceChildren(card);

  const show = (node: HTMLElement, text: string | null) => {
    node.textContent = text ?? "";
    node.hidden = text === null || text === "";
  };

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
