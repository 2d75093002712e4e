/** Reading events back (polling, for development; production merchants receive them by webhook). */
import { Context, Effect, Layer, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import type { Caller } from "../auth/api-keys.ts";
import { decodeRows } from "../db/rows.ts";
import { NotFound } from "../errors.ts";
import { PageQuery, pageOf } from "../pagination.ts";
import { EventTypeSchema } from "../webhooks/event-types.ts";

export const ListEventsQuery = Schema.Struct({
  ...PageQuery.fields,
  type: Schema.optionalKey(
    EventTypeSchema.annotate({ description: "Only events of this type (see GET /v1/event_types)" }),
  ),
}).annotate({ identifier: "ListEventsQuery" });
export type ListEventsQuery = typeof ListEventsQuery.Type;

export const EventObject = Schema.Struct({
  id: Schema.String.annotate({ description: "evt_…, stable: deduplicate on it" }),
  object: Schema.Literal("event"),
  type: Schema.String,
  created: Schema.Int,
  livemode: Schema.Boolean,
  data: Schema.Struct({ object: Schema.Unknown }),
}).annotate({ identifier: "Event" });
export type EventObject = typeof EventObject.Type;

const Row = Schema.Struct({ payload: EventObject });
const decodeEvents = decodeRows(Row);

export const notFoundEvent = (id: string) =>
  new NotFound({ code: "resource_missing", message: `No such event: '${id.slice(0, 80)}'`, param: "id" });

export class Events extends Context.Service<
  Events,
  {
    readonly list: (
      caller: Caller,
      query: ListEventsQuery,
    ) => Effect.Effect<{ object: "list"; data: EventObject[]; has_more: boolean }, SqlError.SqlError>;
    readonly retrieve: (
      caller: Caller,
      id: string,
    ) => Effect.Effect<EventObject, NotFound | SqlError.SqlError>;
  }
>()("Events") {
  static readonly layer = Layer.effect(
    Events,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      // Newest first, in the order events were recorded (ids of chain facts sort by chain time instead).
      const list = (caller: Caller, query: ListEventsQuery) =>
        Effect.gen(function* () {
          const limit = query.limit ?? 10;
          const type = query.type ?? null;
          const after = query.starting_after ?? null;
          const rows = yield* sql`
            SELECT payload FROM billing.events e
            WHERE merchant_id = ${caller.merchantId} AND livemode = ${caller.livemode}
              AND (${type}::text IS NULL OR type = ${type})
              AND (${after}::text IS NULL OR (inserted_at, id) < (
                SELECT inserted_at, id FROM billing.events WHERE id = ${after} AND merchant_id = ${caller.merchantId}))
            ORDER BY inserted_at DESC, id DESC
            LIMIT ${limit + 1}`.pipe(Effect.flatMap(decodeEvents));
          return pageOf(
            rows.map((row) => row.payload),
            limit,
          );
        });
      const retrieve = (caller: Caller, id: string) =>
        sql`SELECT payload FROM billing.events
            WHERE id = ${id} AND merchant_id = ${caller.merchantId} AND livemode = ${caller.livemode}`.pipe(
          Effect.flatMap(decodeEvents),
          Effect.flatMap((rows) =>
            rows[0] ? Effect.succeed(rows[0].payload) : Effect.fail(notFoundEvent(id)),
          ),
        );
      return { list, retrieve };
    }),
  );
}
