/** A list of events linking to their detail (the Events page and the Overview's latest events). */
import { html } from "htm/preact";
import type { Schemas } from "./api.ts";
import { dateTime } from "./format.ts";
import { hrefOf } from "./router.ts";

export const EventItems = ({
  events,
  empty,
}: {
  readonly events: readonly Schemas["Event"][] | null;
  readonly empty: string;
}) =>
  events === null
    ? html`<p>Loading…</p>`
    : events.length === 0
      ? html`<p>${empty}</p>`
      : html`<ul class="plain events">
          ${events.map(
            (event) => html`<li key=${event.id}>
              <a href=${hrefOf({ page: "events", eventId: event.id })}>${event.type}</a>
              <span class="muted"> ${event.id} · ${dateTime(event.created)}</span>
            </li>`,
          )}
        </ul>`;
