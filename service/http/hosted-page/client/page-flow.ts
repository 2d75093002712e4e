/**
 * The part of a hosted page's flow that both pages share: the state and its render loop, one action at
 * a time, the first read of the session, the wallet (which one, when several are installed; connecting
 * it; putting it on the page's chain), receipts, and the `?close=1` countdown. Each page adds its own
 * steps and words. The browser, the wallets, timers and closing the tab are injected, so a flow runs in
 * tests without a DOM.
 */
import { ensureChain, type PageChain } from "./chain.ts";
import { ApiError } from "./http.ts";
import {
  CONNECT_DECLINED,
  chainError,
  loadError,
  noAccountError,
  type PageError,
  unexpectedError,
  walletError,
} from "./page-error.ts";
import { type CoreEvent, isDone } from "./page-state.ts";
import { type Address, type TransactionReceipt, type WalletActions, walletActions } from "./wallet.ts";
import type { Wallet, WalletInfo, WalletMemory, Wallets } from "./wallets.ts";

/** What every hosted page's flow is given from outside. */
export interface PageEnvironment {
  readonly wallets: Wallets;
  /** The wallet chosen earlier in the tab's session, by rdns (none in tests unless given). */
  readonly memory?: WalletMemory;
  readonly sleep: (ms: number) => Promise<void>;
  /** The page's clock, Unix seconds. */
  readonly now: () => number;
  readonly closeWindow: () => void;
  /** Seconds before a finished page closes its tab (`?close=1`), or null. */
  readonly closeDelay: number | null;
}

/** The wallets as the page shows them. */
export interface WalletChoice {
  readonly options: readonly WalletInfo[];
  /** The wallet in use for the rest of the page's life, once there is one. */
  readonly current: WalletInfo | null;
  /** The customer is asked which wallet to use. */
  readonly picking: boolean;
}

/** What a page's flow tells the view after every change. */
export type Listener<S> = (state: S, wallets: WalletChoice) => void;

/** The controls every hosted page's flow has beside its own actions. */
export interface PageControls {
  readonly wallets: () => WalletChoice;
  /**
   * The clock moved (the page's script calls it several times a second): the page's own use of time,
   * and once the page is done, a second of the `?close=1` countdown each whole second since then.
   */
  readonly tick: () => void;
  /** Stops the countdown of `?close=1`. */
  readonly keepOpen: () => void;
  /** The customer picked a wallet: remembered, and the action that asked for it carries on. */
  readonly chooseWallet: (uuid: string) => Promise<void>;
  readonly cancelWalletChoice: () => void;
}

/** A hosted page's flow as its script drives it (page-main.ts). */
export interface HostedFlow<S, A extends string> extends PageControls {
  readonly state: () => S;
  /** Reads the session and shows what is left to do. */
  readonly load: () => Promise<void>;
  /** One of the page's buttons. */
  readonly act: (action: A) => Promise<void> | void;
  /** The error's "Try again". */
  readonly retry: () => Promise<void>;
  /** "Use another wallet": offers the wallets again. */
  readonly changeWallet: () => void;
  /** Reads the session again, every `pollMs` of the page's script (pages that follow it live). */
  readonly poll?: () => Promise<void>;
}

export interface ConnectRequest<R extends string> {
  readonly chain: PageChain;
  /** What the network is needed for, in the refusal's words ("authorize", "pay"). */
  readonly purpose: string;
  /** What "Try again" does after a connecting error. */
  readonly retry: PageError<R>["retry"];
  readonly noWallet: PageError<R>;
  /** The action again: it runs once the customer has picked one of several wallets. */
  readonly again: () => Promise<void>;
  /** Refuses a connected account before anything else is asked of the wallet; null accepts it. */
  readonly check?: (account: Address) => PageError<R> | null;
}

/** How long (in 100 ms steps) the page waits for a late-injected wallet before saying there is none. */
const WALLET_WAIT_STEPS = 10;

/**
 * The shared flow of a page whose state is `S` (with its session once read), driven by the page's
 * events `E` and the shared ones; `R` is what the page's "Try again" can do beside reloading.
 */
export const createPageFlow = <
  S extends { readonly phase: { readonly tag: string }; readonly session: object | null },
  E,
  R extends string,
>(
  env: PageEnvironment,
  initial: S,
  reduce: (state: S, event: E | CoreEvent<R>) => S,
  onChange: Listener<S>,
) => {
  let state = initial;
  let running = false;
  let closeRequested = false;
  /** When the page was done (the countdown counts from there), and the seconds counted since. */
  let doneAt: number | null = null;
  let counted = 0;
  let chosen: Wallet | null = null;
  let picking = false;
  let pending: (() => Promise<void>) | null = null;

  const wallets = (): WalletChoice => ({
    options: env.wallets.list().map((wallet) => wallet.info),
    current: chosen?.info ?? null,
    picking,
  });
  const emit = () => onChange(state, wallets());
  env.wallets.subscribe(emit);

  const dispatch = (event: E | CoreEvent<R>) => {
    const next = reduce(state, event);
    if (next === state) return;
    state = next;
    if (isDone(state.phase) && doneAt === null) doneAt = env.now();
    emit();
    // `delay=0` closes as soon as the page is done; otherwise when the countdown reaches 0.
    if (isDone(state.phase) && state.phase.countdown === 0 && !closeRequested) {
      closeRequested = true;
      env.closeWindow();
    }
  };
  const fail = (error: PageError<R>) => dispatch({ type: "failed", error });

  /** One action at a time; the buttons are hidden meanwhile, this guards double clicks. */
  const exclusive = async (task: () => Promise<void>) => {
    if (running) return;
    running = true;
    try {
      await task();
    } catch (error) {
      fail(unexpectedError(error));
    } finally {
      running = false;
    }
  };

  /** The first read of the session; false (with not-found or the error shown) when it failed. */
  const load = async (read: () => Promise<void>, what: string): Promise<boolean> => {
    try {
      await read();
      return true;
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) dispatch({ type: "not_found" });
      else dispatch({ type: "load_failed", error: loadError<R>(what, error) });
      return false;
    }
  };

  /** Some wallets inject their provider or announce themselves a moment after the page's scripts run. */
  const waitForWallets = async (): Promise<boolean> => {
    for (let i = 0; i < WALLET_WAIT_STEPS && env.wallets.list().length === 0; i += 1) await env.sleep(100);
    return env.wallets.list().length > 0;
  };

  /** The wallet to use: the chosen one, the only one, the one chosen earlier in the tab; else ask. */
  const wallet = (): Wallet | "ask" | null => {
    if (chosen !== null) return chosen;
    const list = env.wallets.list();
    const remembered = env.memory?.get() ?? null;
    const found =
      list.length === 1 ? list[0] : list.find((w) => remembered !== null && w.info.rdns === remembered);
    if (found !== undefined) {
      chosen = found;
      return found;
    }
    return list.length === 0 ? null : "ask";
  };

  /**
   * Runs `task` with the wallet connected on the page's chain. With several wallets and none chosen it
   * asks the customer first and returns; `request.again` runs once they picked one.
   */
  const connect = async (
    request: ConnectRequest<R>,
    task: (wallet: WalletActions, account: Address) => Promise<void>,
  ): Promise<void> => {
    let found = wallet();
    if (found === null && (await waitForWallets())) found = wallet();
    if (found === null) return fail(request.noWallet);
    if (found === "ask") {
      picking = true;
      pending = request.again;
      return emit();
    }
    const actions = walletActions(found.provider);
    dispatch({ type: "step", step: "connect" });
    let account: Address | undefined;
    try {
      [account] = await actions.requestAccounts();
    } catch (error) {
      return fail(walletError(error, CONNECT_DECLINED, request.retry));
    }
    if (account === undefined) return fail(noAccountError(request.retry));
    dispatch({ type: "connected", account });
    const refused = request.check?.(account) ?? null;
    if (refused !== null) return fail(refused);
    dispatch({ type: "step", step: "switch_chain" });
    const problem = chainError<R>(
      await ensureChain(actions, request.chain),
      request.chain,
      request.purpose,
      request.retry,
    );
    if (problem !== null) return fail(problem);
    await task(actions, account);
  };

  /** The receipt of `hash`, asked of the wallet every `intervalMs` until it has one. */
  const receipt = async (actions: WalletActions, hash: string, intervalMs: number) => {
    for (;;) {
      const found: TransactionReceipt | null = await actions.receipt(hash);
      if (found !== null) return found;
      await env.sleep(intervalMs);
    }
  };

  const controls: PageControls = {
    wallets,
    tick: () => {
      const now = env.now();
      const phase = state.phase;
      if (!isDone(phase)) return dispatch({ type: "tick", at: now });
      // Still open a tick after closing: the browser refused (a tab the customer opened themselves).
      if (phase.countdown === 0 && closeRequested && !phase.closeFailed)
        return dispatch({ type: "close_failed" });
      if (phase.countdown === null || phase.countdown === 0 || now - (doneAt ?? now) < counted + 1) return;
      counted += 1;
      dispatch({ type: "tick", at: now });
    },
    keepOpen: () => dispatch({ type: "keep_open" }),
    chooseWallet: (uuid) => {
      const picked = env.wallets.list().find((w) => w.info.uuid === uuid);
      if (!picking || picked === undefined) return Promise.resolve();
      chosen = picked;
      picking = false;
      if (picked.info.rdns !== "") env.memory?.set(picked.info.rdns);
      const again = pending;
      pending = null;
      emit();
      return again === null ? Promise.resolve() : again();
    },
    cancelWalletChoice: () => {
      picking = false;
      pending = null;
      emit();
    },
  };

  /**
   * The flow as the page's script drives it: `actions` are the page's buttons, and "Try again" repeats
   * the one its error names, or `reload`s. `changeWallet` says what runs once another wallet is picked.
   */
  const hosted = <A extends string>(page: {
    readonly load: () => Promise<void>;
    readonly reload: () => Promise<void>;
    readonly actions: Readonly<Record<A | R, () => Promise<void>>>;
    readonly changeWallet: () => (() => Promise<void>) | null;
  }): HostedFlow<S, A | R | "retry" | "keep_open"> => {
    const retry = () => {
      const again = (state.phase as { readonly error?: PageError<R> }).error?.retry ?? null;
      if (again === null) return Promise.resolve();
      return again === "reload" ? exclusive(page.reload) : page.actions[again]();
    };
    return {
      ...controls,
      state: () => state,
      load: () => exclusive(page.load),
      retry,
      act: (action) => {
        if (action === "retry") return retry();
        if (action === "keep_open") return controls.keepOpen();
        return page.actions[action as A | R]();
      },
      changeWallet: () => {
        if (running) return;
        picking = true;
        pending = page.changeWallet();
        emit();
      },
    };
  };

  return {
    state: () => state,
    /** The session, once read (the page's actions run only then). */
    session: (): NonNullable<S["session"]> => {
      if (state.session === null) throw new Error("no session yet");
      return state.session as NonNullable<S["session"]>;
    },
    dispatch,
    fail,
    exclusive,
    load,
    waitForWallets,
    connect,
    receipt,
    hosted,
  };
};
