/**
 * The portal's flow: read the portal, and run what the customer confirms (cancel a subscription at the
 * end of its period). It runs the effects and feeds the state machine; the render loop, one action at a
 * time and the wallet are the hosted pages' shared core (../../hosted-page/client/page-flow.ts), so
 * the flow runs in tests without a DOM.
 */
import { serviceError } from "../../hosted-page/client/page-error.ts";
import * as hosted from "../../hosted-page/client/page-flow.ts";
import { errorMessage } from "../../hosted-page/client/wallet.ts";
import { type Api, ApiError } from "./api.ts";
import { dateText } from "./format.ts";
import { initialState, type Retry, reduce, type State, type Event as StateEvent } from "./state.ts";
import type { Action } from "./view-model.ts";

export interface FlowEnvironment extends hosted.PageEnvironment {
  readonly api: Api;
}

export type Flow = hosted.HostedFlow<State, Action>;

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

  const ask = (pending: { kind: "cancel"; id: string }) => dispatch({ type: "ask", pending });
  const dismiss = async () => dispatch({ type: "dismiss" });

  const flow = core.hosted<"dismiss">({
    load,
    reload: load,
    actions: { dismiss },
    changeWallet: () => null,
  });

  /** The buttons of one subscription or mandate carry its id: `cancel:sub_…`, `confirm_cancel:sub_…`. */
  const act = (action: Action): Promise<void> | void => {
    const [verb, id] = action.split(":", 2) as [string, string | undefined];
    if (id === undefined) return flow.act(action as "dismiss" | "retry" | "keep_open");
    if (verb === "cancel") return ask({ kind: "cancel", id });
    if (verb === "confirm_cancel") return cancel(id);
  };
  return { ...flow, act };
};
