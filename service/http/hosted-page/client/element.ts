/** Builds DOM elements without HTML strings (the pages' CSP has no inline script, and no innerHTML is needed). */
export const element = <K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Record<string, string> = {},
  ...children: Array<Node | string>
): HTMLElementTagNameMap[K] => {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  node.append(...children);
  return node;
};

/** Shows `text` in `node`, or hides the node when there is none. */
export const show = (node: HTMLElement, text: string | null): void => {
  setText(node, text ?? "");
  node.hidden = text === null || text === "";
};

/** Sets the text only when it changed: a live region would announce a text set again. */
export const setText = (node: HTMLElement, text: string): void => {
  if (node.textContent !== text) node.textContent = text;
};

/**
 * Replaces `parent`'s children with one element per item, only when the items changed: the page renders
 * several times a second, and nodes replaced under a screen reader's cursor lose its place.
 */
export const rebuild = <T>(parent: HTMLElement, items: readonly T[], build: (item: T) => Node): void => {
  const key = JSON.stringify(items);
  if (parent.dataset.key === key) return;
  parent.dataset.key = key;
  parent.replaceChildren(...items.map(build));
};

/** What a page's view model says about where the focus goes when the page reaches another stage. */
export interface StageFocus {
  readonly stage: string;
  readonly focus: "action" | "error" | "title";
  readonly error: unknown;
  readonly action: unknown;
}

/**
 * Moves the focus when the stage changes (to the error, the action or the title). On arrival only an
 * error or an urgent action (the closing countdown) takes the focus.
 */
export const focusOnStageChange = (targets: {
  readonly error: HTMLElement;
  readonly action: HTMLElement;
  readonly title: HTMLElement;
}) => {
  let stage: string | null = null;
  return (model: StageFocus): void => {
    if (model.stage === stage) return;
    const first = stage === null || stage === "loading";
    stage = model.stage;
    if (first && model.focus === "title") return;
    const target =
      model.focus === "error" && model.error !== null
        ? targets.error
        : model.focus === "action" && model.action !== null
          ? targets.action
          : targets.title;
    target.focus();
  };
};
