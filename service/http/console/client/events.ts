/** Events: the list with a type filter, and one event with its payload and a Replay button. */
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import type { operations } from "../../../../client/index.ts";
import { type Schemas, unwrap } from "./api.ts";
import { useBusy } from "./busy.ts";
import { EventItems } from "./event-items.ts";
import { dateTime } from "./format.ts";
import { useLoaded } from "./loaded.ts";
import type { PageProps } from "./page-props.ts";
import { hrefOf } from "./router.ts";

/** The filter's values come from GET /v1/event_types, which lists exactly this union. */
type EventTypeName = NonNullable<NonNullable<operations["listEvents"]["parameters"]["query"]>["type"]>;

const EventList = ({ client, fail }: PageProps) => {
  const [types, setTypes] = useState<readonly Schemas["EventType"][]>([]);
  const [type, setType] = useState("");

  useEffect(() => {
    unwrap(client.GET("/v1/event_types"))
      .then((list) => setTypes(list.data))
      .catch(fail);
  }, [client, fail]);

  const { value: events } = useLoaded(
    async () => {
      const query = type === "" ? { limit: 50 } : { limit: 50, type: type as EventTypeName };
      return (await unwrap(client.GET("/v1/events", { params: { query } }))).data;
    },
    fail,
    [client, type],
  );

  return html`<h1>Events</h1>
    <div class="filter">
      <label for="event-type">Type</label>
      <select id="event-type" value=${type} onChange=${(e: Event) => setType((e.currentTarget as HTMLSelectElement).value)}>
        <option value="">All types</option>
        ${types.map((t) => html`<option key=${t.type} value=${t.type}>${t.type}</option>`)}
      </select>
    </div>
    <${EventItems} events=${events} empty="No events." />`;
};

const EventDetail = ({ client, announce, fail, eventId }: PageProps & { readonly eventId: string }) => {
  const [event, setEvent] = useState<Schemas["Event"] | null>(null);
  const [replayed, setReplayed] = useState<readonly Schemas["WebhookDelivery"][]>([]);
  const { busy, run } = useBusy(fail);

  useEffect(() => {
    unwrap(client.GET("/v1/events/{id}", { params: { path: { id: eventId } } }))
      .then(setEvent)
      .catch(fail);
  }, [client, fail, eventId]);

  const replay = async () => {
    await run(async () => {
      const sent = await unwrap(
        client.POST("/v1/events/{id}/replay", { params: { path: { id: eventId } }, body: {} }),
      );
      setReplayed((previous) => [...sent.data, ...previous]);
      announce(
        sent.data.length === 0
          ? "No endpoint to replay this event to."
          : `Replayed: ${sent.data.length} new deliver${sent.data.length === 1 ? "y" : "ies"}.`,
      );
    });
  };

  return html`<p><a href=${hrefOf({ page: "events", eventId: null })}>← All events</a></p>
    <h1>${event === null ? "Event" : event.type}</h1>
    ${
      event === null
        ? html`<p>Loading…</p>`
        : html`<p class="muted">${event.id} · ${dateTime(event.created)} · ${event.livemode ? "live" : "test"}</p>
          <div class="actions">
            <button data-mutates type="button" disabled=${busy} onClick=${replay}>Replay</button>
          </div>
          ${
            replayed.length === 0
              ? null
              : html`<ul class="plain">
                ${replayed.map(
                  (delivery) =>
                    html`<li key=${delivery.id}>Delivery ${delivery.id} to ${delivery.endpoint}: ${delivery.status}</li>`,
                )}
              </ul>`
          }
          <h2>Payload</h2>
          <pre class="payload" tabindex="0" aria-label="Event payload">${JSON.stringify(event, null, 2)}</pre>`
    }`;
};

export const Events = (props: PageProps & { readonly eventId: string | null }) =>
  props.eventId === null
    ? html`<${EventList} ...${props} />`
    : html`<${EventDetail} key=${props.eventId} ...${props} eventId=${props.eventId} />`;
