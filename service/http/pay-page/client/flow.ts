/**
 * The pay page's flow: read the session every ~2 s, tick the clock every second, and pay from the
 * wallet, either gasless (sign an EIP-3009 TransferWithAuthorization, which the service's relayer
 * submits) or with an ERC-20 `transfer` the wallet sends. It runs the effects and feeds the state
 * machine; what both hosted pages do alike (the wallet, connecting, the chain, the render loop,
 * `?close=1`) is the shared core's (../../hosted-page/client/page-flow.ts). The service, the wallets, the
 * clock, randomness and closing the tab are injected, so the flow runs in tests without a DOM.
 */

import { noWalletError, serviceError, type Words, walletError } from "../../hosted-page/client/page-error.ts";
import * as hosted from "../../hosted-page/client/page-flow.ts";
import { errorMessage, type WalletActions } from "../../hosted-page/client/wallet.ts";
import { type Api, ApiError } from "./api.ts";
import { randomNonce, transferCalldata } from "./format.ts";
import {
  initialState,
  type PageError,
  payStatus,
  type Retry,
  reduce,
  type State,
  type Event as StateEvent,
  takesPayment,
} from "./state.ts";
import type { Address, Session } from "./types.ts";
import type { Action } from "./view-model.ts";

export interface FlowEnvironment extends hosted.PageEnvironment {
  readonly api: Api;
  /** `n` random bytes (crypto.getRandomValues). */
  readonly randomBytes: (n: number) => Uint8Array;
  /** How often the wallet is asked for a transfer's receipt. */
  readonly receiptPollMs: number;
}

/** A signed authorization stays valid this long (chain time); the service wants at least a minute. */
export const AUTHORIZATION_VALIDITY_SECONDS = 3600;

export interface Flow extends hosted.HostedFlow<State, Action> {
  /** Reads the session again (every ~2 s while the payment can still change). */
  readonly poll: () => Promise<void>;
  readonly payGasless: () => Promise<void>;
  readonly payTransfer: () => Promise<void>;
}

const NO_WALLET = noWalletError<Retry>(
  "Paying from this page needs a browser wallet, such as MetaMask, Rabby or Coinbase Wallet. You can also send the amount to the address above from any wallet or exchange.",
  null,
);

const declined = (step: "sign" | "send" | "mining"): Words =>
  step === "sign"
    ? {
        title: "Signature declined",
        message: "You declined to sign the payment in your wallet. Nothing was paid.",
      }
    : {
        title: "Transfer declined",
        message: "You declined the transfer in your wallet. Nothing was paid.",
      };

/** A failed wallet request of one of the page's own steps. */
const stepError = (step: "sign" | "send" | "mining", error: unknown, retry: Retry): PageError =>
  walletError(error, declined(step), retry);

export const createFlow = (env: FlowEnvironment, onChange: hosted.Listener<State>): Flow => {
  const initial = initialState(env.closeDelay, env.now());
  const core = hosted.createPageFlow<State, StateEvent, Retry>(env, initial, reduce, onChange);
  const { dispatch, fail, session, state } = core;
  const read = async () => {
    const at = env.now();
    dispatch({ type: "session", session: await env.api.session(), at });
  };

  const load = () => core.load(read, "payment").then(() => undefined);

  const poll = async () => {
    const tag = state().phase.tag;
    // Nothing changes for the payer any more once the page is done, closed or gone.
    if (
      tag === "loading" ||
      tag === "not_found" ||
      tag === "load_error" ||
      tag === "done" ||
      tag === "closed"
    )
      return;
    try {
      await read();
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) dispatch({ type: "not_found" });
      // Anything else is a blip: the next read tries again.
    }
  };

  /** The service refused the signed authorization: say why, or show what changed. */
  const refused = async (error: unknown) => {
    const symbol = session().token.symbol;
    if (!(error instanceof ApiError))
      return fail(serviceError("Payment not sent", errorMessage(error), "pay_gasless"));
    switch (error.code) {
      case "payment_page_not_found":
        return dispatch({ type: "not_found" });
      case "payment_not_payable":
      case "payment_amount_too_low": {
        // Something arrived, or the payment closed, meanwhile: show it as it is now.
        await read().catch(() => undefined);
        const now = state();
        if (now.phase.tag !== "busy") return;
        if (now.session !== null && takesPayment(payStatus(now.session)))
          return fail(serviceError("The payment changed", error.message, "pay_gasless"));
        return dispatch({ type: "resume" });
      }
      case "gasless_unsupported":
        await read().catch(() => undefined);
        return fail(serviceError("Gasless payment unavailable", error.message, "pay_transfer"));
      case "payer_balance_insufficient":
        return fail(serviceError(`Not enough ${symbol}`, error.message, "pay_gasless"));
      case "authorization_in_flight":
        return fail(serviceError("Another payment is on its way", error.message, "pay_gasless"));
      case "authorization_limit_reached":
      case "payer_cooling_off":
      case "rate_limited":
        return fail(serviceError("Too many attempts", error.message, "pay_transfer"));
      default:
        return fail(serviceError("Payment not sent", error.message, "pay_gasless"));
    }
  };

  const signAndSubmit = async (wallet: WalletActions, account: Address) => {
    const current = session();
    const gasless = current.gasless;
    if (gasless === null) return payByTransfer(wallet, account);
    // Chain time, as the page estimates it: the service checks the window against the chain's.
    const { offset, localNow } = state();
    const now = offset === null ? current.now : localNow + offset;
    const message = {
      from: account,
      to: gasless.to,
      value: gasless.value,
      validAfter: "0",
      validBefore: String(Math.floor(now) + AUTHORIZATION_VALIDITY_SECONDS),
      nonce: randomNonce(env.randomBytes(32)),
    };
    dispatch({ type: "step", step: "sign" });
    let signature: string;
    try {
      signature = await wallet.signTypedData(account, {
        domain: gasless.domain,
        types: gasless.types,
        primaryType: gasless.primary_type,
        message,
      });
    } catch (error) {
      return fail(stepError("sign", error, "pay_gasless"));
    }
    dispatch({ type: "step", step: "submit" });
    let answered: Session;
    try {
      answered = await env.api.authorize({
        from: message.from,
        to: message.to,
        value: message.value,
        valid_after: message.validAfter,
        valid_before: message.validBefore,
        nonce: message.nonce,
        signature,
      });
    } catch (error) {
      return refused(error);
    }
    dispatch({ type: "sent", kind: "gasless", hash: answered.gasless_transaction?.hash ?? null });
    dispatch({ type: "session", session: answered, at: env.now() });
  };

  const payByTransfer = async (wallet: WalletActions, account: Address) => {
    const current = session();
    dispatch({ type: "step", step: "send" });
    let hash: string;
    try {
      hash = await wallet.sendTransaction({
        from: account,
        to: current.token.address,
        data: transferCalldata(current.address, BigInt(current.amount_remaining)),
      });
    } catch (error) {
      return fail(stepError("send", error, "pay_transfer"));
    }
    dispatch({ type: "step", step: "mining" });
    let receipt: { status: string };
    try {
      receipt = await core.receipt(wallet, hash, env.receiptPollMs);
    } catch (error) {
      return fail(stepError("mining", error, "pay_transfer"));
    }
    if (receipt.status !== "0x1")
      return fail({
        kind: "wallet",
        title: "Transfer failed",
        message: `Your transfer failed on ${current.chain.name} (${hash}); nothing was paid. Check your ${current.token.symbol} balance, then try again.`,
        retry: "pay_transfer",
      });
    dispatch({ type: "sent", kind: "transfer", hash });
  };

  /** Connects the wallet on the payment's chain, then pays with it. */
  const withWallet = (
    retry: Retry,
    again: () => Promise<void>,
    task: (wallet: WalletActions, account: Address) => Promise<void>,
  ) => core.connect({ chain: session().chain, purpose: "pay", retry, noWallet: NO_WALLET, again }, task);

  const payGasless = (): Promise<void> =>
    core.exclusive(() => withWallet("pay_gasless", payGasless, signAndSubmit));

  const payTransfer = (): Promise<void> =>
    core.exclusive(() => withWallet("pay_transfer", payTransfer, payByTransfer));

  return {
    ...core.hosted({
      load,
      reload: async () => {
        dispatch({ type: "resume" });
        await (state().session === null ? load() : read());
      },
      actions: { pay_gasless: payGasless, pay_transfer: payTransfer },
      changeWallet: () => null,
    }),
    poll,
    payGasless,
    payTransfer,
  };
};
