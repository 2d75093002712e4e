/** A tiny hash router: `#/webhooks`, `#/events/evt_…`; everything else is the overview. */
import { useEffect, useState } from "preact/hooks";

export type Route =
  | { readonly page: "overview" }
  | { readonly page: "webhooks" }
  | { readonly page: "events"; readonly eventId: string | null }
  | { readonly page: "mandates"; readonly mandateId: string | null }
  | { readonly page: "payments"; readonly paymentId: string | null }
  | { readonly page: "subscriptions"; readonly subscriptionId: string | null }
  | { readonly page: "prices" }
  | { readonly page: "reconciliation" }
  | { readonly page: "balance" }
  | { readonly page: "reports" };

export const parseRoute = (hash: string): Route => {
  const [page, id] = hash.replace(/^#\/?/, "").split("/");
  if (page === "webhooks") return { page };
  if (page === "events") return { page, eventId: id ? decodeURIComponent(id) : null };
  if (page === "mandates") return { page, mandateId: id ? decodeURIComponent(id) : null };
  if (page === "payments") return { page, paymentId: id ? decodeURIComponent(id) : null };
  if (page === "subscriptions") return { page, subscriptionId: id ? decodeURIComponent(id) : null };
  if (page === "prices" || page === "reconciliation" || page === "balance" || page === "reports")
    return { page };
  return { page: "overview" };
};

export const hrefOf = (route: Route): string => {
  if (route.page === "events" && route.eventId !== null)
    return `#/events/${encodeURIComponent(route.eventId)}`;
  if (route.page === "mandates" && route.mandateId !== null)
    return `#/mandates/${encodeURIComponent(route.mandateId)}`;
  if (route.page === "payments" && route.paymentId !== null)
    return `#/payments/${encodeURIComponent(route.paymentId)}`;
  if (route.page === "subscriptions" && route.subscriptionId !== null)
    return `#/subscriptions/${encodeURIComponent(route.subscriptionId)}`;
  return `#/${route.page}`;
};

export const useRoute = (): Route => {
  const [route, setRoute] = useState(() => parseRoute(window.location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(window.location.hash));
    window.addEventListener("hashchange", onChange);
    return () => window.removeEventListener("hashchange", onChange);
  }, []);
  return route;
};
