import { Effect } from "effect";
import { listOf } from "../../chains/objects.ts";
import { EventObject, Events, ListEventsQuery } from "../../events/events.ts";
import { event } from "../examples/events.ts";
import { IDS, page } from "../examples/shared.ts";
import { eventIdParam } from "../path-params.ts";
import { defineRoute } from "../route.ts";

export const eventRoutes = [
  defineRoute({
    method: "GET",
    path: "/v1/events",
    operationId: "listEvents",
    tag: "Events",
    summary: "List events",
    description: "Your events, newest first (polling for development; use webhooks in production).",
    body: ListEventsQuery,
    response: listOf(EventObject, "EventList"),
    examples: { response: page(event) },
    handler: ({ caller, body }) =>
      Effect.flatMap(Effect.service(Events), (events) => events.list(caller, body)),
  }),
  defineRoute({
    method: "GET",
    path: "/v1/events/{id}",
    params: { id: eventIdParam },
    operationId: "retrieveEvent",
    tag: "Events",
    summary: "Retrieve an event",
    response: EventObject,
    examples: { params: { id: IDS.event }, response: event },
    handler: ({ caller, params }) =>
      Effect.flatMap(Effect.service(Events), (events) => events.retrieve(caller, params.id ?? "")),
  }),
];
