/**
 * The outbox: every event a merchant receives is a row of billing.events, written in the same
 * transaction as the state change it reports. `key` names the outcome (a chain fact, or a charge's
 * failure), and its uniqueness makes each outcome one event however often it is processed.
 */
import { PgClient } from "@effect/sql-pg";
import { Array as Arr, Clock, Effect } from "effect";
import { newId } from "../ids.ts";
import { fanOut } from "../webhooks/fan-out.ts";

export const EVENTS_CHANNEL = "billing_events";

export interface NewEvent {
  readonly id: string;
  readonly merchantId: string;
  readonly livemode: boolean;
  readonly type: string;
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

/** The payload merchants receive: `{id, object: "event", type, created, livemode, data: {object}}`. */
export const eventPayload = (event: NewEvent) => ({
  id: event.id,
  object: "event",
  type: event.type,
  created: event.created,
  livemode: event.livemode,
  data: { object: event.object },
});

/** Inserts events whose key is new, with their webhook deliveries; returns the ids inserted. */
export const insertEvents = (events: readonly NewEvent[]) =>
  Effect.gen(function* () {
    if (!Arr.isReadonlyArrayNonEmpty(events)) return [] as string[];
    const sql = yield* PgClient.PgClient;
    const inserted = yield* sql<{ id: string }>`
      INSERT INTO billing.events ${sql.insert(
        Arr.map(events, (event) => ({
          id: event.id,
          merchant_id: event.merchantId,
          livemode: event.livemode,
          type: event.type,
          created: new Date(event.created * 1000),
          payload: sql.json(eventPayload(event)),
          fact_key: event.key,
          chain_id: event.onchain?.chainId ?? null,
          block_number: event.onchain?.blockNumber ?? null,
          tx_hash: event.onchain?.txHash ?? null,
          log_index: event.onchain?.logIndex ?? null,
        })),
      )}
      ON CONFLICT DO NOTHING
      RETURNING id`;
    if (inserted.length === 0) return [] as string[];
    yield* sql`SELECT pg_notify(${EVENTS_CHANNEL}, ${String(inserted.length)})`;
    const ids = new Set(inserted.map((row) => row.id));
    yield* fanOut(events.filter((event) => ids.has(event.id)));
    return [...ids];
  });

/** An outcome the service itself observed (not a chain fact), e.g. a charge refused for funds. */
export const raiseEvent = (input: Omit<NewEvent, "id" | "created">) =>
  Effect.gen(function* () {
    const id = yield* newId("event");
    const created = Math.floor((yield* Clock.currentTimeMillis) / 1000);
    return yield* insertEvents([{ ...input, id, created }]);
  });
