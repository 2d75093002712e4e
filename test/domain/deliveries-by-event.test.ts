/**
 * An event's deliveries are found without reading its endpoints' other deliveries: the listing's `event`
 * filter, a replay's targets (the endpoints that had the event) and the crash recovery's delete each read
 * a handful of rows, however many deliveries the endpoint holds (years of history). Counted from the
 * transaction's own statistics of the deliveries table: rows read by sequential scans, and rows fetched
 * through indexes.
 */
import { expect, layer } from "@effect/vitest";
import { Effect, Layer, Schema } from "effect";
import { SqlClient } from "effect/sql";
import { decodeRows } from "../../service/db/rows.ts";
import { type NewEvent, Outbox } from "../../service/events/outbox.ts";
import { Merchants } from "../../service/merchants/merchants.ts";
import { Deliveries } from "../../service/webhooks/deliveries.ts";
import { DeliveryStore } from "../../service/webhooks/delivery-store.ts";
import { WebhookEndpoints } from "../../service/webhooks/endpoints.ts";
import { domainTestLayer, fakeChain, freshDatabase } from "./harness.ts";

const testLayer = Layer.unwrap(
  Effect.promise(async () => domainTestLayer(await freshDatabase("by_event"), fakeChain(2_000_000_000))),
);

const HISTORY = 20_000;

const decodeReads = decodeRows(
  Schema.Struct({ seq: Schema.NumberFromString, fetched: Schema.NumberFromString }),
);

/** Rows of webhook_deliveries that `effect` read, run in a transaction of its own. */
const rowsRead = <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    return yield* sql.withTransaction(
      Effect.gen(function* () {
        const value = yield* effect;
        const [reads] = yield* sql`SELECT coalesce(seq_tup_read, 0)::text AS seq,
            coalesce(idx_tup_fetch, 0)::text AS fetched
          FROM pg_stat_xact_user_tables
          WHERE schemaname = 'billing' AND relname = 'webhook_deliveries'`.pipe(Effect.flatMap(decodeReads));
        return { value, read: (reads?.seq ?? 0) + (reads?.fetched ?? 0) };
      }),
    );
  });

layer(testLayer, { timeout: 120_000 })("an event's deliveries", (it) => {
  it.effect(`are read by event, not through the endpoint's ${HISTORY} others`, () =>
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const merchant = yield* (yield* Merchants).create("Shop");
      const scope = { merchantId: merchant.id, livemode: false };
      const endpoint = yield* (yield* WebhookEndpoints).create(scope, {
        url: "http://127.0.0.1:9/hooks",
        events: ["mandate.revoked"],
      });
      const events: NewEvent[] = Array.from({ length: HISTORY }, (_, n) => ({
        id: `evt_history${String(n).padStart(6, "0")}`,
        merchantId: merchant.id,
        livemode: false,
        type: "mandate.revoked",
        created: 2_000_000_000,
        object: { id: `mdt_${n}`, object: "mandate" },
        key: `by-event:${n}`,
      }));
      yield* sql.withTransaction((yield* Outbox).insert(events));
      // The endpoint no longer subscribes to the type: a replay finds it only through its deliveries.
      yield* (yield* WebhookEndpoints).update(scope, endpoint.id, { events: ["invoice.paid"] });
      yield* sql`ANALYZE billing.webhook_deliveries`;
      const first = "evt_history000000";

      const listed = yield* rowsRead(
        (yield* Deliveries).list(scope, endpoint.id, { event: first, limit: 10 }),
      );
      expect(listed.value.data.map((delivery) => delivery.event)).toEqual([first]);
      expect(listed.read).toBeLessThanOrEqual(10);

      const replayed = yield* rowsRead((yield* Deliveries).replay(scope, first, {}));
      expect(replayed.value.data.map((delivery) => [delivery.endpoint, delivery.trigger])).toEqual([
        [endpoint.id, "replay"],
      ]);
      expect(replayed.read).toBeLessThanOrEqual(10);

      const forgotten = yield* rowsRead((yield* DeliveryStore).forgetEvents([first]));
      expect(forgotten.read).toBeLessThanOrEqual(10);
      const left = yield* (yield* Deliveries).list(scope, endpoint.id, { event: first, limit: 10 });
      expect(left.data).toEqual([]);
    }),
  );
});
