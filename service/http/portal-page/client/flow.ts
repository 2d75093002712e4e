/**
 * The portal's flow: read the portal, and run what the customer confirms: cancel a subscription at the
 * end of its period (no wallet: the link is the credential), or revoke a mandate without gas (the
 * mandate's wallet signs the escrow's `Revoke`, the service relays it, the page waits until the chain
 * confirms it). It runs the effects and feeds the state machine; the render loop, one action at a
 * time and the wallet are the hosted pages' shared core (../../hosted-page/client/page-flow.ts), so
 * the flow runs in tests without a DOM.
 */
import { noWalletError, serviceError, walletError } from "../../hosted-page/client/page-error.ts";
import * as hosted from "../../hosted-page/client/page-flow.ts";
import { type Address, errorMessage, type WalletActions } from "../../hosted-page/client/wallet.ts";
import { type Api, ApiError } from "./api.ts";
import { dateText, sameAddress } from "./format.ts";
import {
  initialState,
  type PageError,
  type Retry,
  reduce,
  type State,
  type Event as StateEvent,
} from "./state.ts";
import type { Mandate, RevocationRequest } from "./types.ts";
import type { Action } from "./view-model.ts";

export interface FlowEnvironment extends hosted.PageEnvironment {
  readonly api: Api;
  /** How often the portal is read while a revocation waits for the chain. */
  readonly pollIntervalMs: number;
  /** Reads before the page stops waiting and says the revocation is on its way. */
  readonly confirmPolls: number;
}

export type Flow = hosted.HostedFlow<State, Action>;

const NO_WALLET = noWalletError<Retry>(
  "Revoking needs the browser wallet that signed this authorization (MetaMask, Rabby, Coinbase Wallet…). Install or unlock it, then try again.",
  "reload",
);

const REVOKE_DECLINED = {
  title: "Signature declined",
  message: "You declined to sign the revocation in your wallet. Nothing changed.",
};

export const wrongAccountError = (expected: string, connected: string): PageError => ({
  kind: "wrong_account",
  title: "Wrong account",
  message: `This authorization belongs to the account ${expected}, not to ${connected}. Switch your wallet to that account, then try again.`,
  retry: "reload",
});

/** The link is gone: expired meanwhile, or never valid. */
const LINK_GONE = new Set(["portal_session_not_found", "portal_session_expired"]);

export const createFlow = (env: FlowEnvironment, onChange: hosted.Listener<State>): Flow => {
  const core = hosted.createPageFlow<State, StateEvent, Retry>(env, initialState(), reduce, onChange);
  const { dispatch, fail, session } = core;

  const reload = async () => {
    dispatch({ type: "session", session: await env.api.session() });
  };
  const load = async () => {
    await core.load(reload, "page");
  };

  const refused = (title: string, error: unknown) => {
    if (error instanceof ApiError && LINK_GONE.has(error.code)) return dispatch({ type: "not_found" });
    fail(serviceError<Retry>(title, errorMessage(error), "reload"));
  };

  const cancel = (id: string) =>
    core.exclusive(async () => {
      const subscription = session().subscriptions.find((s) => s.id === id);
      if (subscription === undefined) return;
      dispatch({ type: "step", step: "cancel" });
      try {
        dispatch({ type: "session", session: await env.api.cancel(id) });
      } catch (error) {
        return refused("Subscription not canceled", error);
      }
      const ended = session().subscriptions.find((s) => s.id === id);
      dispatch({
        type: "succeeded",
        notice:
          ended?.ends_at === null || ended?.ends_at === undefined
            ? `Your ${subscription.product_name} subscription is canceled.`
            : `Your ${subscription.product_name} subscription ends on ${dateText(ended.ends_at)}. Nothing more will be charged for it.`,
      });
    });

  /** Signs the revocation in the mandate's wallet, has it relayed, and waits until the chain confirms it. */
  const signAndRevoke = async (mandate: Mandate, wallet: WalletActions, account: Address) => {
    dispatch({ type: "step", step: "sign_revocation" });
    let request: RevocationRequest;
    try {
      request = await env.api.revocation(mandate.id);
    } catch (error) {
      return refused("Not revoked", error);
    }
    let signature: string;
    try {
      signature = await wallet.signTypedData(account, request.typed_data);
    } catch (error) {
      return fail(walletError<Retry>(error, REVOKE_DECLINED, "reload"));
    }
    dispatch({ type: "step", step: "submit_revocation" });
    try {
      await env.api.revoke(mandate.id, { deadline: String(request.typed_data.message.deadline), signature });
    } catch (error) {
      return refused("Not revoked", error);
    }
    dispatch({ type: "step", step: "confirm_revocation" });
    const merchant = session().merchant.name;
    for (let read = 0; read < env.confirmPolls; read += 1) {
      await env.sleep(env.pollIntervalMs);
      try {
        await reload();
      } catch {
        continue; // a blip; keep waiting
      }
      if (!session().mandates.some((m) => m.id === mandate.id))
        return dispatch({
          type: "succeeded",
          notice: `Revoked: ${merchant} can no longer collect payments from your wallet with this authorization.`,
        });
    }
    dispatch({
      type: "succeeded",
      notice:
        "Your revocation was sent. It takes effect once the network confirms it; reload this page to see it.",
    });
  };

  const revoke = (id: string): Promise<void> =>
    core.exclusive(async () => {
      const mandate = session().mandates.find((m) => m.id === id);
      if (mandate === undefined || mandate.customer_address === null) return;
      const bound = mandate.customer_address;
      await core.connect(
        {
          chain: mandate.chain,
          purpose: "revoke",
          retry: "reload",
          noWallet: NO_WALLET,
          again: () => revoke(id),
          check: (account) => (sameAddress(account, bound) ? null : wrongAccountError(bound, account)),
        },
        (wallet, account) => signAndRevoke(mandate, wallet, account),
      );
    });

  const ask = (pending: { kind: "cancel" | "revoke"; id: string }) => dispatch({ type: "ask", pending });
  const dismiss = async () => dispatch({ type: "dismiss" });

  const flow = core.hosted<"dismiss">({
    load,
    reload: load,
    actions: { dismiss },
    // Another wallet picked: the revocation asked for runs with it.
    changeWallet: () => {
      const target = core.state().target;
      if (target === null || !target.startsWith("mdt_")) return null;
      return () => revoke(target);
    },
  });

  /** The buttons of one subscription or mandate carry its id: `cancel:sub_…`, `confirm_revoke:mdt_…`. */
  const act = (action: Action): Promise<void> | void => {
    const [verb, id] = action.split(":", 2) as [string, string | undefined];
    if (id === undefined) return flow.act(action as "dismiss" | "retry" | "keep_open");
    if (verb === "cancel" || verb === "revoke") return ask({ kind: verb, id });
    if (verb === "confirm_cancel") return cancel(id);
    if (verb === "confirm_revoke") return revoke(id);
  };
  return { ...flow, act };
};
