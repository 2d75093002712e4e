/** Renders a view model into the page: the shared card, with the gas notice and the steps. */
import { type CardHandlers, mountCard, type View } from "../../hosted-page/client/card.ts";
import { element, rebuild, show } from "../../hosted-page/client/element.ts";
import type { Action, ViewModel } from "./view-model.ts";

const STATUS_WORDS = {
  todo: "to do",
  active: "in progress",
  done: "done",
  skipped: "not needed",
  failed: "failed",
};

export const mountView = (root: HTMLElement, handlers: CardHandlers<Action>): View<ViewModel> => {
  const gasTitle = element("h2", { class: "gas-notice-title", id: "gas-notice-title" });
  const gasMessage = element("p", { class: "gas-notice-message" });
  const gas = element(
    "aside",
    { class: "gas-notice", id: "gas-notice", "aria-labelledby": "gas-notice-title" },
    gasTitle,
    gasMessage,
  );
  const steps = element("ol", { class: "steps", "aria-label": "Progress" });
  const card = mountCard<Action>(root, handlers, { afterSummary: [gas, steps] });

  return {
    render(model, wallets) {
      gas.hidden = model.gas === null;
      show(gasTitle, model.gas?.title ?? null);
      show(gasMessage, model.gas?.message ?? null);
      rebuild(steps, model.steps, (step) =>
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
      );
      steps.hidden = model.steps.length === 0;
      card.render(model, wallets);
    },
  };
};
