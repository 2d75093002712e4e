/**
 * The authorization flow: connect the wallet, switch its chain, sign the terms and the permit (or send
 * the approval), submit, and wait for the chain. It runs the effects and feeds the state machine; what
 * both hosted pages do alike (the wallet, connecting, the chain, the render loop, `?close=1`) is the
 * shared core's (../../hosted-page/client/page-flow.ts), so the flow runs in tests without a DOM.
 */

import { noWalletError, serviceError, type Words, walletError } from "../../hosted-page/client/page-error.ts";
import * as hosted from "../../hosted-page/client/page-flow.ts";
import { type Address, errorMessage, type WalletActions } from "../../hosted-page/client/wallet.ts";
import { type Api, ApiError } from "./api.ts";
import { sameAddress } from "./format.ts";
import {
  initialState,
  type PageError,
  type Retry,
  reduce,
  type State,
  type Event as StateEvent,
} from "./state.ts";
import type { Session, TermsResponse } from "./types.ts";
import type { Action } from "./view-model.ts";

export interface FlowEnvironment extends hosted.PageEnvironment {
  readonly api: Api;
  /** How often the session is read while waiting for the chain. */
  readonly pollIntervalMs: number;
}

/**
 * A submitted authorization that the session reports as neither pending nor done for this many reads in
 * a row did not make it on chain (the relayer's transaction failed).
 */
export const UNCONFIRMED_POLLS_BEFORE_FAILURE = 10;

export interface Flow extends hosted.HostedFlow<State, Action> {
  readonly connect: () => Promise<void>;
  readonly authorize: () => Promise<void>;
}

const NO_WALLET = noWalletError<Retry>(
  "This page needs a browser wallet, such as MetaMask, Rabby or Coinbase Wallet. Install or unlock one, then try again.",
  "connect",
);

export const wrongAccountError = (expected: string, connected: string | null): PageError => ({
  kind: "wrong_account",
  title: "Wrong account",
  message: `This authorization belongs to the account ${expected}${
    connected === null ? "" : `, not to ${connected}`
  }. Switch your wallet to that account, then try again.`,
  retry: "connect",
});

const declined = (session: Session, step: "sign_terms" | "allowance"): Words =>
  step === "allowance"
    ? {
        title: "Signature declined",
        message: `You declined the ${session.token.symbol} allowance in your wallet. Nothing was authorized.`,
      }
    : {
        title: "Signature declined",
        message: "You declined to sign the terms in your wallet. Nothing was authorized.",
      };

/** A failed wallet request of one of the page's own steps. */
const stepError = (session: Session, step: "sign_terms" | "allowance", error: unknown): PageError =>
  walletError(error, declined(session, step), "authorize");

export const createFlow = (env: FlowEnvironment, onChange: hosted.Listener<State>): Flow => {
  const initial = initialState(env.closeDelay);
  const core = hosted.createPageFlow<State, StateEvent, Retry>(env, initial, reduce, onChange);
  const { dispatch, fail, session, state } = core;

  /** Waits for the chain after a submission, until done, revoked or given up. */
  const confirm = async () => {
    let unconfirmed = 0;
    while (state().phase.tag === "busy") {
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
        fail(
          serviceError(
            "Authorization not confirmed",
            "Your authorization didn't go through on the network. Nothing was authorized; try again.",
            "authorize",
          ),
        );
    }
  };

  const reload = async () => {
    dispatch({ type: "session", session: await env.api.session() });
  };

  const load = async () => {
    if (await core.load(reload, "authorization")) await confirm();
  };

  /**
   * Says at once when there is no wallet to connect, after a moment for one that announces itself
   * late; the customer can already act meanwhile (connecting waits for it too).
   */
  const lookForWallets = async () => {
    if (state().phase.tag !== "connect" || (await core.waitForWallets())) return;
    if (state().phase.tag === "connect") fail(NO_WALLET);
  };

  const serverError = async (error: unknown) => {
    if (!(error instanceof ApiError))
      return fail(serviceError("Something went wrong", errorMessage(error), "authorize"));
    const current = session();
    switch (error.code) {
      case "wrong_account":
        return fail(
          current.customer_address === null
            ? { kind: "wrong_account", title: "Wrong account", message: error.message, retry: "connect" }
            : wrongAccountError(current.customer_address, state().account),
        );
      case "authorization_not_found":
        return dispatch({ type: "not_found" });
      case "mandate_revoked":
      case "nothing_to_sign":
        await reload();
        return confirm();
      case "terms_changed":
        // Often: signed meanwhile (another tab, a double submit); then there is nothing to redo.
        await reload().catch(() => undefined);
        if (!session().needs_signature || session().status === "revoked") return confirm();
        return fail(
          serviceError(
            "The terms changed",
            "The terms changed while you were signing. Review them above and sign again.",
            "authorize",
          ),
        );
      case "terms_expired":
        return fail(
          serviceError(
            "Signature expired",
            "The terms expired before they were submitted. Sign again to continue.",
            "authorize",
          ),
        );
      case "authorization_failed":
        return fail(serviceError("Authorization refused", error.message, "authorize"));
      default:
        return fail(serviceError("Something went wrong", error.message, "authorize"));
    }
  };

  /** Grants the escrow its allowance: a signed permit, an approve transaction, or nothing. */
  const allowance = async (
    wallet: WalletActions,
    account: Address,
    terms: TermsResponse,
  ): Promise<{ permit: string | null } | null> => {
    const current = session();
    if (terms.permit === null && terms.approve === null) {
      dispatch({ type: "skipped", step: "allowance" });
      return { permit: null };
    }
    dispatch({ type: "step", step: "allowance" });
    try {
      if (terms.permit !== null) return { permit: await wallet.signTypedData(account, terms.permit) };
      const approve = terms.approve as NonNullable<TermsResponse["approve"]>;
      const hash = await wallet.sendTransaction({ from: account, to: approve.to, data: approve.data });
      const receipt = await core.receipt(wallet, hash, env.pollIntervalMs * 2);
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
      fail(stepError(current, "allowance", error));
      return null;
    }
  };

  const sign = async (wallet: WalletActions, account: Address) => {
    const current = session();
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
      return fail(stepError(current, "sign_terms", error));
    }
    const granted = await allowance(wallet, account, terms);
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
    await confirm();
  };

  /** Connects the wallet on the mandate's chain, refusing an account the mandate is not bound to. */
  const withWallet = (
    again: () => Promise<void>,
    task: (wallet: WalletActions, account: Address) => Promise<void>,
  ) => {
    const current = session();
    return core.connect(
      {
        chain: current.chain,
        purpose: "authorize",
        retry: "connect",
        noWallet: NO_WALLET,
        again,
        check: (account) =>
          current.customer_address !== null && !sameAddress(account, current.customer_address)
            ? wrongAccountError(current.customer_address, account)
            : null,
      },
      task,
    );
  };

  const connect = (): Promise<void> =>
    core.exclusive(() => withWallet(connect, async () => dispatch({ type: "ready_to_sign" })));

  // Connecting again, cheaply: the customer may have switched account or network since connecting.
  const authorize = (): Promise<void> => core.exclusive(() => withWallet(authorize, sign));

  const flow = core.hosted({
    load,
    reload: load,
    actions: { connect, authorize },
    // Another wallet picked after one was connected: connect the new one (its account, its chain).
    changeWallet: () => (state().account === null ? null : connect),
  });
  return { ...flow, load: () => flow.load().then(lookForWallets), connect, authorize };
};
