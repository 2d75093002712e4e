/**
 * The outbox's notification: one per insert that added events, carrying how many it added; none for a
 * batch whose keys were all known, none for a rolled-back insert.
 */
import { PgClient } from "@effect/sql-pg";
import { expect, layer } from "@effect/vitest";
import { Effect, Layer, Queue } from "effect";
import { SqlClient } from "effect/sql";
import { EVENTS_CHANNEL, type NewEvent, Outbox } from "../../service/events/outbox.ts";
import { Merchants } from "../../service/merchants/merchants.ts";
import { domainTestLayer, fakeChain, freshDatabase } from "./harness.ts";

const testLayer = Layer.unwrap(
  Effect.promise(async () => domainTestLayer(await freshDatabase("outbox"), fakeChain(2_000_000_000))),
);

let keys = 0;
const events = (merchantId: string, count: number): NewEvent[] =>
  Array.from({ length: count }, () => {
    const n = ++keys;
    return {
      id: `evt_outbox${n}`,
      merchantId,
      livemode: false,
      type: "mandate.revoked",
      created: 2_000_000_000,
      object: { id: `man_${n}`, object: "mandate" },
      key: `outbox-test:${n}`,
    };
  });

/**
 * The payloads of the notifications committed so far: a marker is sent after them, and Postgres delivers
 * notifications in commit order.
 */
const received = (notifications: Queue.Dequeue<{ readonly payload: string }, unknown>) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    yield* sql`SELECT pg_notify(${EVENTS_CHANNEL}, 'marker')`;
    const got: string[] = [];
    for (;;) {
      const { payload } = yield* Queue.take(notifications);
      if (payload === "marker") return got;
      got.push(payload);
    }
  });

layer(testLayer, { timeout: 60_000 })("outbox notification", (it) => {
  it.effect("one per committed insert, with the count inserted; none for known keys or a rollback", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const pg = yield* PgClient.PgClient;
        const sql = yield* SqlClient.SqlClient;
        const outbox = yield* Outbox;
        const merchant = yield* (yield* Merchants).create("Shop");
        // Returned once Postgres has confirmed the LISTEN.
        const notifications = yield* pg.listen(EVENTS_CHANNEL);

        const batch = events(merchant.id, 3);
        const ids = yield* sql.withTransaction(outbox.insert(batch));
        expect([...ids].sort()).toEqual(batch.map((event) => event.id).sort());
        expect(yield* received(notifications)).toEqual(["3"]);

        // The same keys again, and one new: one inserted, one notification saying so.
        const again = [...batch, ...events(merchant.id, 1)];
        expect(yield* outbox.insert(again)).toEqual([again[3]?.id]);
        expect(yield* received(notifications)).toEqual(["1"]);

        // Only known keys: nothing inserted, nothing sent.
        expect(yield* outbox.insert(again)).toEqual([]);
        expect(yield* received(notifications)).toEqual([]);

        // Rolled back: nothing sent.
        const rolledBack = yield* sql
          .withTransaction(
            Effect.flatMap(outbox.insert(events(merchant.id, 2)), () => Effect.fail("rollback" as const)),
          )
          .pipe(Effect.flip);
        expect(rolledBack).toBe("rollback");
        expect(yield* received(notifications)).toEqual([]);
      }),
    ),
  );
});
