/**
 * The part of a hosted page's card that says what is happening: the alert with an error, the status
 * line, the countdown and the main action button. Built once, updated in place; the focus moves when
 * the page reaches another stage.
 */
import { element, focusOnStageChange, setText, show } from "./element.ts";

export interface Notice<A extends string> {
  readonly stage: string;
  readonly focus: "action" | "error" | "title";
  readonly error: { readonly title: string; readonly message: string } | null;
  readonly status: string;
  readonly busy: boolean;
  readonly statusVisible: boolean;
  readonly countdown: string | null;
  readonly action: { readonly kind: A; readonly label: string } | null;
}

export const cardNotice = <A extends string>(title: HTMLElement, onAction: (action: A) => void) => {
  const errorTitle = element("h2", { class: "error-title" });
  const errorMessage = element("p", { class: "error-message" });
  const error = element("div", { class: "error", id: "error", tabindex: "-1" }, errorTitle, errorMessage);
  const alert = element("div", { role: "alert", class: "alert-region" }, error);
  const status = element("p", { class: "status", id: "status", role: "status", "aria-live": "polite" });
  const countdown = element("p", { class: "countdown", id: "countdown" });
  const button = element("button", { type: "button", class: "button", id: "action" });
  let action: A | null = null;
  button.addEventListener("click", () => {
    if (action !== null) onAction(action);
  });
  const moveFocus = focusOnStageChange({ error, action: button, title });

  return {
    alert,
    status,
    countdown,
    button,
    render(model: Notice<A>): void {
      error.hidden = model.error === null;
      setText(errorTitle, model.error?.title ?? "");
      setText(errorMessage, model.error?.message ?? "");

      // Errors are announced by the alert; the status region carries progress only.
      setText(status, model.error === null ? model.status : "");
      status.classList.toggle("status-busy", model.busy);
      status.hidden = model.error !== null;
      status.classList.toggle("visually-hidden", !model.statusVisible);
      show(countdown, model.countdown);

      action = model.action?.kind ?? null;
      button.hidden = model.action === null;
      setText(button, model.action?.label ?? "");
      button.className = model.action?.kind === "keep_open" ? "button button-secondary" : "button";
    },
    /** After the whole card is rendered. */
    moveFocus,
  };
};
