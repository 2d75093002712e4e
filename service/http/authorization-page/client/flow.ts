/**
 * The authorization flow: connect the wallet, switch its chain, sign the terms and the permit (or send
 * the approval), submit, and wait for the chain. It runs the effects and feeds the state machine; the
 * wallet, the service, timers and closing the tab are injected, so the flow runs in tests without a DOM.
 *
 * One module of some length on purpose: each step of the signing flow waits on the one before it (a
 * wallet answer, a chain receipt), and reading them in order is what makes the flow checkable.
 */

import {
  chainMissingText,
  ensureChain as switchChain,
  wrongNetworkText,
} from "../../hosted-page/client/chain.ts";
import {
  type Eip1193Provider,
  errorMessage,
  type WalletActions,
  walletActions,
  walletFailure,
} from "../../hosted-page/client/wallet.ts";
import { type Api, ApiError } from "./api.ts";
import { sameAddress } from "./format.ts";
import {
  initialState,
  type PageError,
  reduce,
  type State,
  type Event as StateEvent,
  type StepId,
} from "./state.ts";
import type { Session, TermsResponse } from "./types.ts";

export interface FlowEnvironment {
  readonly api: Api;
  /** The injected wallet, looked up at each use (an extension may inject it late), or null. */
  readonly provider: () => Eip1193Provider | null;
  readonly sleep: (ms: number) => Promise<void>;
  readonly closeWindow: () => void;
  /** How often the session is read while waiting for the chain. */
  readonly pollIntervalMs: number;
  /** Seconds before a finished page closes its tab (`?close=1`), or null. */
  readonly closeDelay: number | null;
}

/**
 * A submitted authorization that the session reports as neither pending nor done for this many reads in
 * a row did not make it on chain (the relayer's transaction failed).
 */
export const UNCONFIRMED_POLLS_BEFORE_FAILURE = 10;

/** How long (in 100 ms steps) the page waits for a late-injected wallet before saying there is none. */
const WALLET_WAIT_STEPS = 10;

export interface Flow {
  readonly state: () => State;
  /** Reads the session and shows what is left to do. */
  readonly load: () => Promise<void>;
  readonly connect: () => Promise<void>;
  readonly authorize: () => Promise<void>;
  /** The error's "Try again". */
  readonly retry: () => Promise<void>;
  /** Stops the countdown of `?close=1`. */
  readonly keepOpen: () => void;
}

const NO_WALLET: PageError = {
  kind: "no_wallet",
  title: "No wallet found",
  message:
    "This page needs a browser wallet, such as MetaMask, Rabby or Coinbase Wallet. Install or unlock one, then try again.",
  retry: "connect",
};

const stepRetry = (step: StepId): PageError["retry"] =>
  step === "connect" || step === "switch_chain" ? "connect" : "authorize";

export const wrongAccountError = (expected: string, connected: string | null): PageError => ({
  kind: "wrong_account",
  title: "Wrong account",
  message: `This authorization belongs to the account ${expected}${
    connected === null ? "" : `, not to ${connected}`
  }. Switch your wallet to that account, then try again.`,
  retry: "connect",
});

const chainMissingError = (session: Session, addError: unknown): PageError => ({
  kind: "chain_missing",
  ...chainMissingText(session.chain, addError),
  retry: "connect",
});

const rejectedMessages = (session: Session, step: StepId): { title: string; message: string } => {
  switch (step) {
    case "connect":
      return {
        title: "Wallet not connected",
        message: "You declined the connection request in your wallet.",
      };
    case "switch_chain":
      return {
        title: "Network not switched",
        message: `You declined switching to ${session.chain.name}. Your wallet must be on ${session.chain.name} to authorize.`,
      };
    case "allowance":
      return {
        title: "Signature declined",
        message: `You declined the ${session.token.symbol} allowance in your wallet. Nothing was authorized.`,
      };
    default:
      return {
        title: "Signature declined",
        message: "You declined to sign the terms in your wallet. Nothing was authorized.",
      };
  }
};

export const walletError = (session: Session, step: StepId, error: unknown): PageError => {
  const failure = walletFailure(error);
  const retry = stepRetry(step);
  return failure.kind === "rejected"
    ? { kind: "rejected", ...rejectedMessages(session, step), retry }
    : { ...failure, retry };
};

export const createFlow = (env: FlowEnvironment, onChange: (state: State) => void): Flow => {
  let state = initialState(env.closeDelay);
  let running = false;

  const dispatch = (event: StateEvent) => {
    state = reduce(state, event);
    onChange(state);
  };
  const fail = (error: PageError) => dispatch({ type: "failed", error });
  const session = (): Session => {
    if (state.session === null) throw new Error("no session yet");
    return state.session;
  };

  /** One user action at a time; the buttons are disabled meanwhile, this guards double submits. */
  const exclusive = async (task: () => Promise<void>) => {
    if (running) return;
    running = true;
    try {
      await task();
    } catch (error) {
      fail({ kind: "server", title: "Something went wrong", message: errorMessage(error), retry: "reload" });
    } finally {
      running = false;
    }
  };

  const countdown = async () => {
    while (state.phase.tag === "done" && state.phase.countdown !== null && state.phase.countdown > 0) {
      await env.sleep(1000);
      dispatch({ type: "tick" });
    }
    if (state.phase.tag === "done" && state.phase.countdown === 0) {
      env.closeWindow();
      // Still here: the browser refused (a tab the customer opened themselves, in some browsers).
      await env.sleep(500);
      dispatch({ type: "close_failed" });
    }
  };

  /** Waits for the chain after a submission, until done, revoked or given up. */
  const confirm = async () => {
    let unconfirmed = 0;
    while (state.phase.tag === "busy") {
      await env.sleep(env.pollIntervalMs);
      let current: Session;
      try {
        current = await env.api.session();
      } catch {
        continue; // a blip; keep waiting
      }
      dispatch({ type: "session", session: current });
      const lost =
        current.needs_signature && current.pending_transaction === null && current.status !== "revoked";
      unconfirmed = lost ? unconfirmed + 1 : 0;
      if (unconfirmed >= UNCONFIRMED_POLLS_BEFORE_FAILURE)
        fail({
          kind: "server",
          title: "Authorization not confirmed",
          message: "Your authorization didn't go through on the network. Nothing was authorized; try again.",
          retry: "authorize",
        });
    }
  };

  /** After the session changed under us: show it and carry on with whatever it needs. */
  const settle = async () => {
    if (state.phase.tag === "busy") await confirm();
    if (state.phase.tag === "done") await countdown();
  };

  const reload = async () => {
    dispatch({ type: "session", session: await env.api.session() });
  };

  const load = async () => {
    try {
      await reload();
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return dispatch({ type: "not_found" });
      return fail({
        kind: "server",
        title: "Couldn't load this authorization",
        message: errorMessage(error),
        retry: "reload",
      });
    }
    if (state.phase.tag === "connect") {
      // Some wallets inject their provider a moment after the page's scripts run.
      for (let i = 0; i < WALLET_WAIT_STEPS && env.provider() === null; i += 1) await env.sleep(100);
      if (env.provider() === null) return fail(NO_WALLET);
    }
    await settle();
  };

  const serverError = async (error: unknown) => {
    if (!(error instanceof ApiError))
      return fail({
        kind: "server",
        title: "Something went wrong",
        message: errorMessage(error),
        retry: "authorize",
      });
    const current = session();
    switch (error.code) {
      case "wrong_account":
        return fail(
          current.customer_address === null
            ? { kind: "wrong_account", title: "Wrong account", message: error.message, retry: "connect" }
            : wrongAccountError(current.customer_address, state.account),
        );
      case "authorization_not_found":
        return dispatch({ type: "not_found" });
      case "mandate_revoked":
      case "nothing_to_sign":
        await reload();
        return settle();
      case "terms_changed":
        // Often: signed meanwhile (another tab, a double submit); then there is nothing to redo.
        await reload().catch(() => undefined);
        if (!session().needs_signature || session().status === "revoked") return settle();
        return fail({
          kind: "server",
          title: "The terms changed",
          message: "The terms changed while you were signing. Review them above and sign again.",
          retry: "authorize",
        });
      case "terms_expired":
        return fail({
          kind: "server",
          title: "Signature expired",
          message: "The terms expired before they were submitted. Sign again to continue.",
          retry: "authorize",
        });
      case "authorization_failed":
        return fail({
          kind: "server",
          title: "Authorization refused",
          message: error.message,
          retry: "authorize",
        });
      default:
        return fail({
          kind: "server",
          title: "Something went wrong",
          message: error.message,
          retry: "authorize",
        });
    }
  };

  /** Makes sure the wallet is on the mandate's chain, adding the chain when the wallet lacks it. */
  const ensureChain = async (wallet: WalletActions): Promise<boolean> => {
    const current = session();
    const outcome = await switchChain(wallet, current.chain);
    switch (outcome.kind) {
      case "ok":
        return true;
      case "wallet_error":
        fail(walletError(current, "switch_chain", outcome.error));
        return false;
      case "missing":
        fail(chainMissingError(current, outcome.addError));
        return false;
      case "still_other":
        fail({ kind: "wallet", ...wrongNetworkText(current.chain), retry: "connect" });
        return false;
    }
  };

  /** Connects the wallet on the right account and chain; null (with the error shown) when it can't. */
  const connectWallet = async (): Promise<WalletActions | null> => {
    const current = session();
    const provider = env.provider();
    if (provider === null) {
      fail(NO_WALLET);
      return null;
    }
    const wallet = walletActions(provider);
    dispatch({ type: "step", step: "connect" });
    let account: string | undefined;
    try {
      [account] = await wallet.requestAccounts();
    } catch (error) {
      fail(walletError(current, "connect", error));
      return null;
    }
    if (account === undefined) {
      fail({
        kind: "wallet",
        title: "No account",
        message: "Your wallet didn't share an account. Unlock it or create an account, then try again.",
        retry: "connect",
      });
      return null;
    }
    dispatch({ type: "connected", account: account as `0x${string}` });
    if (current.customer_address !== null && !sameAddress(account, current.customer_address)) {
      fail(wrongAccountError(current.customer_address, account));
      return null;
    }
    dispatch({ type: "step", step: "switch_chain" });
    return (await ensureChain(wallet)) ? wallet : null;
  };

  const waitForReceipt = async (wallet: WalletActions, hash: string) => {
    for (;;) {
      const receipt = await wallet.receipt(hash);
      if (receipt !== null) return receipt;
      await env.sleep(env.pollIntervalMs * 2);
    }
  };

  /** Grants the escrow its allowance: a signed permit, an approve transaction, or nothing. */
  const allowance = async (
    wallet: WalletActions,
    terms: TermsResponse,
  ): Promise<{ permit: string | null } | null> => {
    const current = session();
    const account = state.account as `0x${string}`;
    if (terms.permit === null && terms.approve === null) {
      dispatch({ type: "skipped", step: "allowance" });
      return { permit: null };
    }
    dispatch({ type: "step", step: "allowance" });
    try {
      if (terms.permit !== null) return { permit: await wallet.signTypedData(account, terms.permit) };
      const approve = terms.approve as NonNullable<TermsResponse["approve"]>;
      const hash = await wallet.sendTransaction({ from: account, to: approve.to, data: approve.data });
      const receipt = await waitForReceipt(wallet, hash);
      if (receipt.status !== "0x1") {
        fail({
          kind: "wallet",
          title: "Approval failed",
          message: `Your ${current.token.symbol} approval transaction failed on chain (${hash}). Try again.`,
          retry: "authorize",
        });
        return null;
      }
      return { permit: null };
    } catch (error) {
      fail(walletError(current, "allowance", error));
      return null;
    }
  };

  const sign = async (wallet: WalletActions) => {
    const current = session();
    const account = state.account as `0x${string}`;
    dispatch({ type: "step", step: "sign_terms" });
    let terms: TermsResponse;
    try {
      terms = await env.api.terms(account);
    } catch (error) {
      return serverError(error);
    }
    dispatch({ type: "allowance", mode: terms.permit ? "permit" : terms.approve ? "approve" : "none" });
    let signature: string;
    try {
      signature = await wallet.signTypedData(account, terms.terms);
    } catch (error) {
      return fail(walletError(current, "sign_terms", error));
    }
    const granted = await allowance(wallet, terms);
    if (granted === null) return;
    dispatch({ type: "step", step: "submit" });
    let submitted: Session;
    try {
      submitted = await env.api.submit({
        customer_address: account,
        terms: terms.terms.message,
        signature,
        permit_signature: granted.permit,
      });
    } catch (error) {
      return serverError(error);
    }
    dispatch({ type: "step", step: "confirm" });
    dispatch({ type: "session", session: submitted });
    await settle();
  };

  const connect = () =>
    exclusive(async () => {
      if ((await connectWallet()) !== null) dispatch({ type: "ready_to_sign" });
    });

  const authorize = () =>
    exclusive(async () => {
      // Again, cheaply: the customer may have switched account or network since connecting.
      const wallet = await connectWallet();
      if (wallet !== null) await sign(wallet);
    });

  return {
    state: () => state,
    load: () => exclusive(load),
    connect,
    authorize,
    retry: () => {
      const retry = state.phase.tag === "error" ? state.phase.error.retry : null;
      if (retry === "reload") return exclusive(load);
      if (retry === "connect") return connect();
      if (retry === "authorize") return authorize();
      return Promise.resolve();
    },
    keepOpen: () => dispatch({ type: "keep_open" }),
  };
};
