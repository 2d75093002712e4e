/** The console's shell: sign-in or the header (navigation, mode badge, sign-out), a page, the status region. */
import { html } from "htm/preact";
import { useCallback, useEffect, useMemo, useState } from "preact/hooks";
import { ApiError, billingClient, readSession, type Session, signOut } from "./api.ts";
import { Balance } from "./balance.ts";
import { Events } from "./events.ts";
import { messageOf } from "./format.ts";
import { Mandates } from "./mandates.ts";
import { Overview } from "./overview.ts";
import type { PageProps } from "./page-props.ts";
import { Payments } from "./payments.ts";
import { Prices } from "./prices.ts";
import { Reconciliation } from "./reconciliation.ts";
import { Reports } from "./reports.ts";
import { hrefOf, type Route, useRoute } from "./router.ts";
import { SignIn } from "./sign-in.ts";
import { Subscriptions } from "./subscriptions.ts";
import { Webhooks } from "./webhooks.ts";

interface Status {
  readonly message: string;
  readonly isError: boolean;
}

const NAV: readonly { readonly route: Route; readonly label: string }[] = [
  { route: { page: "overview" }, label: "Overview" },
  { route: { page: "webhooks" }, label: "Webhooks" },
  { route: { page: "events", eventId: null }, label: "Events" },
  { route: { page: "mandates", mandateId: null }, label: "Mandates" },
  { route: { page: "payments", paymentId: null }, label: "Payments" },
  { route: { page: "subscriptions", subscriptionId: null }, label: "Subscriptions" },
  { route: { page: "prices" }, label: "Prices" },
  { route: { page: "balance" }, label: "Balance" },
  { route: { page: "reports" }, label: "Reports" },
  { route: { page: "reconciliation" }, label: "Reconciliation" },
];

const Page = ({ route, props }: { readonly route: Route; readonly props: PageProps }) => {
  if (route.page === "webhooks") return html`<${Webhooks} ...${props} />`;
  if (route.page === "events") return html`<${Events} ...${props} eventId=${route.eventId} />`;
  if (route.page === "mandates") return html`<${Mandates} ...${props} mandateId=${route.mandateId} />`;
  if (route.page === "payments") return html`<${Payments} ...${props} paymentId=${route.paymentId} />`;
  if (route.page === "subscriptions")
    return html`<${Subscriptions} ...${props} subscriptionId=${route.subscriptionId} />`;
  if (route.page === "prices") return html`<${Prices} ...${props} />`;
  if (route.page === "reconciliation") return html`<${Reconciliation} ...${props} />`;
  if (route.page === "balance") return html`<${Balance} ...${props} />`;
  if (route.page === "reports") return html`<${Reports} ...${props} />`;
  return html`<${Overview} ...${props} />`;
};

export const App = () => {
  const route = useRoute();
  // undefined: not known yet; null: signed out.
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [status, setStatus] = useState<Status>({ message: "", isError: false });

  const announce = useCallback((message: string, isError = false) => setStatus({ message, isError }), []);
  const fail = useCallback((error: unknown) => {
    if (error instanceof ApiError && error.code === "console_session_invalid") {
      setSession(null);
      setStatus({ message: "Your session has ended: sign in again.", isError: true });
      return;
    }
    setStatus({ message: messageOf(error), isError: true });
  }, []);

  // A result belongs to the page it came from.
  useEffect(() => setStatus({ message: "", isError: false }), [route]);

  useEffect(() => {
    readSession().then(setSession, (error: unknown) => {
      setSession(null);
      fail(error);
    });
  }, [fail]);

  const client = useMemo(() => (session ? billingClient(session) : null), [session]);
  const props = useMemo<PageProps | null>(
    () => (client === null ? null : { client, announce: (m: string) => announce(m), fail }),
    [client, announce, fail],
  );

  const leave = async () => {
    if (!session) return;
    try {
      await signOut(session);
      setSession(null);
      announce("Signed out.");
    } catch (error) {
      fail(error);
    }
  };

  const statusRegion = html`<p
    class=${`status${status.isError ? " error" : ""}`}
    role="status"
    aria-live="polite"
    id="status"
  >${status.message}</p>`;

  if (session === undefined) return html`<main class="page"><p role="status">Loading…</p></main>`;
  if (session === null || props === null)
    return html`<main class="page narrow">
      <${SignIn}
        announce=${announce}
        onSignedIn=${(signedIn: Session) => {
          setSession(signedIn);
          announce("Signed in.");
        }}
      />
      ${statusRegion}
    </main>`;

  return html`<header class="top">
      <div class="brand">
        <strong>Console</strong>
        <span class=${`badge mode ${session.livemode ? "live" : "test"}`}>${session.livemode ? "Live mode" : "Test mode"}</span>
        ${session.read_only ? html`<span class="badge read-only" title="Signed in with a restricted key (rk_…): reading only">Read-only</span>` : null}
        <span class="muted merchant">${session.merchant}</span>
      </div>
      <nav aria-label="Console">
        ${NAV.map(
          (item) => html`<a
            key=${item.label}
            href=${hrefOf(item.route)}
            aria-current=${item.route.page === route.page ? "page" : undefined}
          >${item.label}</a>`,
        )}
      </nav>
      <button type="button" class="secondary" onClick=${leave}>Sign out</button>
    </header>
    <main class=${`page${session.read_only ? " read-only" : ""}`}>
      ${statusRegion}
      <${Page} route=${route} props=${props} />
    </main>`;
};
