/**
 * The outbox, the one writer of `billing.events`: every event a merchant receives is a row written in
 * the same transaction as the state change it reports. `key` names the outcome (a chain fact, a
 * charge's failure…), and its uniqueness makes each outcome one event however often it is processed.
 * New events are handed, in that transaction, to the `EventFanOut` (the webhooks' deliveries), so an
 * event committed is an event offered to its subscribers and one rolled back never was.
 */
import { PgClient } from "@effect/sql-pg";
import { Array as Arr, Clock, Context, Effect, Layer, Schema } from "effect";
import type { SqlError } from "effect/sql";
import { nullableArray } from "../db/query.ts";
import { decodeRows } from "../db/rows.ts";
import { newId } from "../ids.ts";
import type { EventType } from "./event-types.ts";

export const EVENTS_CHANNEL = "billing_events";

export interface NewEvent {
  readonly id: string;
  readonly merchantId: string;
  readonly livemode: boolean;
  readonly type: EventType;
  /** Unix seconds: chain time for chain facts, the service's time for its own outcomes. */
  readonly created: number;
  readonly object: unknown;
  readonly key: string;
  readonly onchain?: {
    readonly chainId: number;
    readonly blockNumber: bigint;
    readonly txHash: string;
    readonly logIndex: number;
  };
}

/** An outcome the service itself observed (not a chain fact): id and time are given by `raise`. */
export type RaisedEvent = Omit<NewEvent, "id" | "created">;

/** The payload merchants receive: `{id, object: "event", type, created, livemode, data: {object}}`. */
export const eventPayload = (event: NewEvent) => ({
  id: event.id,
  object: "event",
  type: event.type,
  created: event.created,
  livemode: event.livemode,
  data: { object: event.object },
});

/** What subscribers of new events are told of each. */
export interface FannedEvent {
  readonly id: string;
  readonly merchantId: string;
  readonly livemode: boolean;
  readonly type: string;
}

/** Receives each batch of new events in the transaction that wrote them (the webhooks' fan-out). */
export class EventFanOut extends Context.Service<
  EventFanOut,
  { readonly deliver: (events: ReadonlyArray<FannedEvent>) => Effect.Effect<void, SqlError.SqlError> }
>()("EventFanOut") {}

const decodeIds = decodeRows(Schema.Struct({ id: Schema.String }));

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient;
  const fanOut = yield* EventFanOut;

  /** Inserts the events whose key is new and fans them out; returns the ids inserted. */
  const insert = (events: ReadonlyArray<NewEvent>) =>
    Effect.gen(function* () {
      if (!Arr.isReadonlyArrayNonEmpty(events)) return [] as string[];
      // One array per column, unnested: a multi-row VALUES of 500 events is 5,500 parameters for the
      // driver to encode (the bench:webhooks inserter's CPU per event fell by about a quarter).
      // The notification goes out with the insert (a statement fewer per batch); Postgres delivers it at
      // commit, and only when a row was inserted. The final SELECT refers to `notified` only so that
      // Postgres runs it (a read-only CTE nothing refers to is skipped).
      const column = <A>(f: (event: NewEvent) => A) => events.map(f);
      // The chain's columns, null for the service's own outcomes (bigints travel as text).
      const onchain = (
        f: (fact: NonNullable<NewEvent["onchain"]>) => string | number,
        type: "text" | "int",
      ) =>
        nullableArray(
          sql,
          events.map((event) => (event.onchain ? f(event.onchain) : null)),
          type,
        );
      const inserted = yield* sql`
        WITH inserted AS (INSERT INTO billing.events
            (id, merchant_id, livemode, type, created, payload, fact_key, chain_id, block_number, tx_hash,
             log_index)
          SELECT * FROM unnest(${column((e) => e.id)}::text[], ${column((e) => e.merchantId)}::text[],
            ${column((e) => e.livemode)}::boolean[], ${column((e) => e.type)}::text[],
            ${column((e) => new Date(e.created * 1000))}::timestamptz[],
            ${column((e) => JSON.stringify(eventPayload(e)))}::jsonb[], ${column((e) => e.key)}::text[],
            ${onchain((fact) => fact.chainId.toString(), "text")}::bigint[],
            ${onchain((fact) => fact.blockNumber.toString(), "text")}::bigint[],
            ${onchain((fact) => fact.txHash, "text")}, ${onchain((fact) => fact.logIndex, "int")})
          ON CONFLICT DO NOTHING
          RETURNING id),
        notified AS (SELECT pg_notify(${EVENTS_CHANNEL}, count(*)::text) FROM inserted HAVING count(*) > 0)
        SELECT id FROM inserted WHERE (SELECT count(*) FROM notified) >= 0`.pipe(Effect.flatMap(decodeIds));
      if (inserted.length === 0) return [] as string[];
      const ids = new Set(inserted.map((row) => row.id));
      yield* fanOut.deliver(events.filter((event) => ids.has(event.id)));
      return [...ids];
    });

  /** Outcomes the service observed, timed by the Clock; returns the ids inserted (none for a known key). */
  const raise = (...raised: ReadonlyArray<RaisedEvent>) =>
    Effect.gen(function* () {
      const created = Math.floor((yield* Clock.currentTimeMillis) / 1000);
      const events = yield* Effect.forEach(raised, (event) =>
        Effect.map(newId("event"), (id): NewEvent => ({ ...event, id, created })),
      );
      return yield* insert(events);
    });

  /**
   * The events about a chain (its facts, and outcomes whose object is one of the chain's mandates,
   * charges, payments, subscriptions, invoices or usage records): what the local stack's crash recovery deletes.
   */
  const ofChain = (chainId: number) =>
    Effect.map(
      sql`SELECT id FROM billing.events WHERE chain_id = ${chainId}
           OR payload #>> '{data,object,id}' IN ${objectsOf(chainId)}
           OR payload #>> '{data,object,mandate}' IN ${objectsOf(chainId)}
           OR payload #>> '{data,object,subscription}' IN ${objectsOf(chainId)}`.pipe(
        Effect.flatMap(decodeIds),
      ),
      (rows) => rows.map((row) => row.id),
    );
  const objectsOf = (chainId: number) => sql`(
    SELECT id FROM billing.mandates WHERE chain_id = ${chainId}
    UNION ALL SELECT id FROM billing.charges WHERE chain_id = ${chainId}
    UNION ALL SELECT id FROM billing.payments WHERE chain_id = ${chainId}
    UNION ALL SELECT id FROM billing.subscriptions WHERE chain_id = ${chainId}
    UNION ALL SELECT i.id FROM billing.invoices i JOIN billing.subscriptions s ON s.id = i.subscription_id
      WHERE s.chain_id = ${chainId}
    UNION ALL SELECT u.id FROM billing.usage_records u JOIN billing.subscriptions s ON s.id = u.subscription_id
      WHERE s.chain_id = ${chainId})`;
  const forget = (ids: ReadonlyArray<string>) =>
    Effect.asVoid(sql`DELETE FROM billing.events WHERE id = ANY (${ids}::text[])`);

  return { insert, raise, ofChain, forget };
});

export class Outbox extends Context.Service<Outbox>()("Outbox", { make }) {
  static readonly layer = Layer.effect(Outbox, make);
}
