/** Reading events back (polling, for development; production merchants receive them by webhook). */
import { Context, Effect, Layer, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { type Page, type PageOrder, pageRows, relation, renderPage, selectRows } from "../db/query.ts";
import { firstOr } from "../db/rows.ts";
import { type InvalidRequest, type NotFound, resourceMissing } from "../errors.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { PageQuery } from "../pagination.ts";
import { EventTypeSchema } from "./event-types.ts";

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

const EVENTS = relation({
  from: "billing.events e",
  alias: "e",
  columns: "e.payload",
  row: Schema.Struct({ payload: EventObject }),
});

export class Events extends Context.Service<
  Events,
  {
    readonly list: (
      scope: MerchantScope,
      query: ListEventsQuery,
    ) => Effect.Effect<Page<EventObject>, InvalidRequest | SqlError.SqlError>;
    readonly retrieve: (
      scope: MerchantScope,
      id: string,
    ) => Effect.Effect<EventObject, NotFound | SqlError.SqlError>;
  }
>()("Events") {
  static readonly layer = Layer.effect(
    Events,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const inScope = (scope: MerchantScope) => [
        sql`e.merchant_id = ${scope.merchantId}`,
        sql`e.livemode = ${scope.livemode}`,
      ];
      // Newest first, in the order events were recorded (ids of chain facts sort by chain time instead).
      const recorded = (scope: MerchantScope): PageOrder => ({
        key: sql`(e.inserted_at, e.id)`,
        newestFirst: sql`e.inserted_at DESC, e.id DESC`,
        oldestFirst: sql`e.inserted_at ASC, e.id ASC`,
        cursorKey: (_, id) =>
          sql`(SELECT inserted_at, id FROM billing.events WHERE id = ${id} AND merchant_id = ${scope.merchantId})`,
      });
      const list = (scope: MerchantScope, query: ListEventsQuery) =>
        Effect.map(
          pageRows(
            sql,
            EVENTS,
            [...inScope(scope), ...(query.type !== undefined ? [sql`e.type = ${query.type}`] : [])],
            query,
            recorded(scope),
          ),
          (page) => renderPage(page, (row) => row.payload),
        );
      const retrieve = (scope: MerchantScope, id: string) =>
        selectRows(sql, EVENTS, [sql`e.id = ${id}`, ...inScope(scope)]).pipe(
          Effect.flatMap(firstOr(() => resourceMissing("event", id))),
          Effect.map((row) => row.payload),
        );
      return { list, retrieve };
    }),
  );
}
