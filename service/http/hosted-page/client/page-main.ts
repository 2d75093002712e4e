/**
 * A hosted page's script: finds the page's root and token, mounts the view, wires the flow to the
 * browser (the wallets, timers, closing the tab) and runs the one-second clock and the page's polling.
 */
import type { CardHandlers, View } from "./card.ts";
import { closeDelayFromQuery } from "./close-option.ts";
import type { HostedFlow, PageEnvironment, WalletChoice } from "./page-flow.ts";
import { discoverWallets, sessionMemory, type WalletWindow } from "./wallets.ts";

export interface HostedPage<S, A extends string, M> {
  readonly mount: (root: HTMLElement, handlers: CardHandlers<A>) => View<M>;
  readonly viewModel: (state: S) => M;
  readonly createFlow: (
    token: string,
    env: PageEnvironment,
    onChange: (state: S, wallets: WalletChoice) => void,
  ) => HostedFlow<S, A>;
  /** How often the flow's `poll` reads the session, from the end of one read to the next. */
  readonly pollMs?: number;
}

export const startHostedPage = <S, A extends string, M>(page: HostedPage<S, A, M>): void => {
  const root = document.getElementById("app");
  const token = root?.dataset.token;
  if (!root || !token) return;
  let flow: HostedFlow<S, A> | null = null;
  const view = page.mount(root, {
    onAction: (action) => void flow?.act(action),
    wallet: {
      choose: (uuid) => void flow?.chooseWallet(uuid),
      change: () => flow?.changeWallet(),
      cancel: () => flow?.cancelWalletChoice(),
    },
  });
  const env: PageEnvironment = {
    wallets: discoverWallets(window as unknown as WalletWindow),
    memory: sessionMemory(() => window.sessionStorage),
    sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
    now: () => Date.now() / 1000,
    closeWindow: () => window.close(),
    closeDelay: closeDelayFromQuery(window.location.search),
  };
  const started = page.createFlow(token, env, (state, wallets) =>
    view.render(page.viewModel(state), wallets),
  );
  flow = started;
  view.render(page.viewModel(started.state()), started.wallets());
  // Four times a second: the countdowns stay within a quarter second of the clock.
  setInterval(() => started.tick(), 250);
  void started.load().then(() => {
    const { poll } = started;
    const pollMs = page.pollMs;
    if (poll === undefined || pollMs === undefined) return;
    // One read at a time: the next starts `pollMs` after the previous answered.
    const next = () => void poll().finally(() => setTimeout(next, pollMs));
    setTimeout(next, pollMs);
  });
};
