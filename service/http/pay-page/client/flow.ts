/**
 * The pay page's flow: read the session every ~2 s, tick the clock every second, and pay from the
 * wallet, either gasless (sign an EIP-3009 TransferWithAuthorization, which the service's relayer
 * submits) or with an ERC-20 `transfer` the wallet sends. It runs the effects and feeds the state
 * machine; the service, the wallet, the clock, randomness and closing the tab are injected, so the
 * flow runs in tests without a DOM.
 */
import { chainMissingText, ensureChain, wrongNetworkText } from "../../hosted-page/client/chain.ts";
import {
  type Eip1193Provider,
  errorMessage,
  type WalletActions,
  walletActions,
  walletFailure,
} from "../../hosted-page/client/wallet.ts";
import { type Api, ApiError } from "./api.ts";
import { randomNonce, transferCalldata } from "./format.ts";
import {
  initialState,
  type PageError,
  payStatus,
  reduce,
  type State,
  type Event as StateEvent,
  type Step,
  takesPayment,
} from "./state.ts";
import type { Address, Session } from "./types.ts";

export interface FlowEnvironment {
  readonly api: Api;
  /** The injected wallet, looked up at each use (an extension may inject it late), or null. */
  readonly provider: () => Eip1193Provider | null;
  readonly sleep: (ms: number) => Promise<void>;
  /** The page's clock, Unix seconds. */
  readonly now: () => number;
  /** `n` random bytes (crypto.getRandomValues). */
  readonly randomBytes: (n: number) => Uint8Array;
  readonly closeWindow: () => void;
  /** How often the wallet is asked for a transfer's receipt. */
  readonly receiptPollMs: number;
  /** Seconds before a paid page closes its tab (`?close=1`), or null. */
  readonly closeDelay: number | null;
}

/** A signed authorization stays valid this long (chain time); the service wants at least a minute. */
export const AUTHORIZATION_VALIDITY_SECONDS = 3600;

export interface Flow {
  readonly state: () => State;
  /** Reads the session for the first time. */
  readonly load: () => Promise<void>;
  /** Reads the session again (every ~2 s while the payment can still change). */
  readonly poll: () => Promise<void>;
  /** The clock moved (every second): the expiry countdown and `?close=1`'s countdown. */
  readonly tick: () => void;
  readonly payGasless: () => Promise<void>;
  readonly payTransfer: () => Promise<void>;
  /** The error's "Try again". */
  readonly retry: () => Promise<void>;
  /** Stops the countdown of `?close=1`. */
  readonly keepOpen: () => void;
}

const NO_WALLET: PageError = {
  kind: "no_wallet",
  title: "No wallet found",
  message:
    "Paying from this page needs a browser wallet, such as MetaMask, Rabby or Coinbase Wallet. You can also send the amount to the address above from any wallet or exchange.",
  retry: null,
};

const rejected = (session: Session, step: Step): { title: string; message: string } => {
  switch (step) {
    case "connect":
      return {
        title: "Wallet not connected",
        message: "You declined the connection request in your wallet.",
      };
    case "switch_chain":
      return {
        title: "Network not switched",
        message: `You declined switching to ${session.chain.name}. Your wallet must be on ${session.chain.name} to pay.`,
      };
    case "send":
    case "mining":
      return {
        title: "Transfer declined",
        message: "You declined the transfer in your wallet. Nothing was paid.",
      };
    default:
      return {
        title: "Signature declined",
        message: "You declined to sign the payment in your wallet. Nothing was paid.",
      };
  }
};

export const walletError = (
  session: Session,
  step: Step,
  error: unknown,
  retry: PageError["retry"],
): PageError => {
  const failure = walletFailure(error);
  return failure.kind === "rejected"
    ? { kind: "rejected", ...rejected(session, step), retry }
    : { ...failure, retry };
};

export const createFlow = (env: FlowEnvironment, onChange: (state: State) => void): Flow => {
  let state = initialState(env.closeDelay, env.now());
  let running = false;
  let closeRequested = false;

  const dispatch = (event: StateEvent) => {
    state = reduce(state, event);
    onChange(state);
    // `delay=0` closes as soon as the page is done; otherwise when the countdown reaches 0.
    if (state.phase.tag === "done" && state.phase.countdown === 0 && !closeRequested) {
      closeRequested = true;
      env.closeWindow();
    }
  };
  const fail = (error: PageError) => dispatch({ type: "failed", error });
  const session = (): Session => {
    if (state.session === null) throw new Error("no session yet");
    return state.session;
  };
  const read = async () => {
    const at = env.now();
    dispatch({ type: "session", session: await env.api.session(), at });
  };

  /** One wallet action at a time; the buttons are hidden meanwhile, this guards double clicks. */
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

  const load = async () => {
    try {
      await read();
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return dispatch({ type: "not_found" });
      dispatch({
        type: "load_failed",
        error: {
          kind: "server",
          title: "Couldn't load this payment",
          message: errorMessage(error),
          retry: "reload",
        },
      });
    }
  };

  const poll = async () => {
    const tag = state.phase.tag;
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

  const tick = () => {
    const phase = state.phase;
    if (phase.tag === "done" && phase.countdown === 0 && closeRequested && !phase.closeFailed) {
      // Still here a second after closing: the browser refused (a tab the payer opened themselves).
      dispatch({ type: "close_failed" });
      return;
    }
    dispatch({ type: "tick", at: env.now() });
  };

  /** Connects the wallet on the payment's chain; the wallet and account, or null (with the error shown). */
  const connect = async (
    retry: PageError["retry"],
  ): Promise<{ wallet: WalletActions; account: Address } | null> => {
    const current = session();
    const provider = env.provider();
    if (provider === null) {
      fail(NO_WALLET);
      return null;
    }
    const wallet = walletActions(provider);
    dispatch({ type: "step", step: "connect" });
    let account: Address | undefined;
    try {
      [account] = await wallet.requestAccounts();
    } catch (error) {
      fail(walletError(current, "connect", error, retry));
      return null;
    }
    if (account === undefined) {
      fail({
        kind: "wallet",
        title: "No account",
        message: "Your wallet didn't share an account. Unlock it or create an account, then try again.",
        retry,
      });
      return null;
    }
    dispatch({ type: "connected", account });
    dispatch({ type: "step", step: "switch_chain" });
    const outcome = await ensureChain(wallet, current.chain);
    switch (outcome.kind) {
      case "ok":
        return { wallet, account };
      case "wallet_error":
        fail(walletError(current, "switch_chain", outcome.error, retry));
        return null;
      case "missing":
        fail({ kind: "chain_missing", ...chainMissingText(current.chain, outcome.addError), retry });
        return null;
      case "still_other":
        fail({ kind: "wallet", ...wrongNetworkText(current.chain), retry });
        return null;
    }
  };

  /** The service refused the signed authorization: say why, or show what changed. */
  const refused = async (error: unknown) => {
    const symbol = session().token.symbol;
    if (!(error instanceof ApiError))
      return fail({
        kind: "server",
        title: "Payment not sent",
        message: errorMessage(error),
        retry: "pay_gasless",
      });
    switch (error.code) {
      case "payment_page_not_found":
        return dispatch({ type: "not_found" });
      case "payment_not_payable":
      case "payment_amount_too_low":
        // Something arrived, or the payment closed, meanwhile: show it as it is now.
        await read().catch(() => undefined);
        if (state.phase.tag !== "busy") return;
        if (state.session !== null && takesPayment(payStatus(state.session)))
          return fail({
            kind: "server",
            title: "The payment changed",
            message: error.message,
            retry: "pay_gasless",
          });
        return dispatch({ type: "resume" });
      case "gasless_unsupported":
        await read().catch(() => undefined);
        return fail({
          kind: "server",
          title: "Gasless payment unavailable",
          message: error.message,
          retry: "pay_transfer",
        });
      case "payer_balance_insufficient":
        return fail({
          kind: "server",
          title: `Not enough ${symbol}`,
          message: error.message,
          retry: "pay_gasless",
        });
      case "authorization_limit_reached":
      case "rate_limited":
        return fail({
          kind: "server",
          title: "Too many attempts",
          message: error.message,
          retry: "pay_transfer",
        });
      default:
        return fail({
          kind: "server",
          title: "Payment not sent",
          message: error.message,
          retry: "pay_gasless",
        });
    }
  };

  const signAndSubmit = async (wallet: WalletActions, account: Address) => {
    const current = session();
    const gasless = current.gasless;
    if (gasless === null) return payByTransfer(wallet, account);
    // Chain time, as the page estimates it: the service checks the window against the chain's.
    const now = state.offset === null ? current.now : state.localNow + state.offset;
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
      return fail(walletError(current, "sign", error, "pay_gasless"));
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
      return fail(walletError(current, "send", error, "pay_transfer"));
    }
    dispatch({ type: "step", step: "mining" });
    for (;;) {
      let receipt: { status: string } | null;
      try {
        receipt = await wallet.receipt(hash);
      } catch (error) {
        return fail(walletError(current, "mining", error, "pay_transfer"));
      }
      if (receipt !== null) {
        if (receipt.status !== "0x1")
          return fail({
            kind: "wallet",
            title: "Transfer failed",
            message: `Your transfer failed on ${current.chain.name} (${hash}); nothing was paid. Check your ${current.token.symbol} balance, then try again.`,
            retry: "pay_transfer",
          });
        return dispatch({ type: "sent", kind: "transfer", hash });
      }
      await env.sleep(env.receiptPollMs);
    }
  };

  const payGasless = () =>
    exclusive(async () => {
      const connected = await connect("pay_gasless");
      if (connected !== null) await signAndSubmit(connected.wallet, connected.account);
    });

  const payTransfer = () =>
    exclusive(async () => {
      const connected = await connect("pay_transfer");
      if (connected !== null) await payByTransfer(connected.wallet, connected.account);
    });

  return {
    state: () => state,
    load: () => exclusive(load),
    poll,
    tick,
    payGasless,
    payTransfer,
    retry: () => {
      const retry =
        state.phase.tag === "error" || state.phase.tag === "load_error" ? state.phase.error.retry : null;
      if (retry === "reload")
        return exclusive(async () => {
          dispatch({ type: "resume" });
          await (state.session === null ? load() : read());
        });
      if (retry === "pay_gasless") return payGasless();
      if (retry === "pay_transfer") return payTransfer();
      return Promise.resolve();
    },
    keepOpen: () => dispatch({ type: "keep_open" }),
  };
};
