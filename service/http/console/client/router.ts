/** A tiny hash router: `#/webhooks`, `#/events/evt_…`; everything else is the overview. */
import { useEffect, useState } from "preact/hooks";

export type Route =
  | { readonly page: "overview" }
  | { readonly page: "webhooks" }
  | { readonly page: "events"; readonly eventId: string | null };

export const parseRoute = (hash: string): Route => {
  const [page, id] = hash.replace(/^#\/?/, "").split("/");
  if (page === "webhooks") return { page };
  if (page === "events") return { page, eventId: id ? decodeURIComponent(id) : null };
  return { page: "overview" };
};

export const hrefOf = (route: Route): string => {
  if (route.page === "events" && route.eventId !== null)
    return `#/events/${encodeURIComponent(route.eventId)}`;
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
