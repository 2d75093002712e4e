/**
 * The one writer of `billing.webhook_deliveries` and `billing.webhook_attempts`: deliveries created (by
 * fan-out in the event's transaction, by a replay, by a test send), claimed as leases by the dispatcher,
 * their attempts and outcomes recorded in batches, and stopped when their endpoint is deleted.
 *
 * A claim changes only `leased_until`, outside every index (a HOT update; `fillfactor` 50 leaves it room),
 * and commits without waiting for the WAL flush: a lease lost in a crash is a lease that expired early, so
 * the delivery is sent again, as at-least-once allows. Attempts and events keep synchronous commits. An
 * outcome moves a delivery only when `attempt_count` is the attempt's predecessor, so a late result from
 * an expired lease is recorded as an attempt but never moves the delivery twice. Claims, leases and retry
 * times read Effect's Clock, never `now()` (the retry test drives two days in seconds).
 */
import { PgClient } from "@effect/sql-pg";
import { Array as Arr, Clock, Context, Effect, Layer, Schema } from "effect";
import { nullableArray, type PageRequest, pageRows, relation } from "../db/query.ts";
import { decodeRows } from "../db/rows.ts";
import { EventObject } from "../events/events.ts";
import type { FannedEvent } from "../events/outbox.ts";
import { freshId, ID_PREFIXES } from "../ids.ts";
import { nextState } from "./retry-schedule.ts";
import type { AttemptOutcome } from "./sender.ts";

export const DELIVERIES_CHANNEL = "billing_webhook_deliveries";

export type DeliveryTrigger = "event" | "replay" | "test";
export const DELIVERY_STATUSES = ["pending", "succeeded", "failed"] as const;
export const TRIGGERS = ["event", "replay", "test"] as const;

export interface NewDelivery {
  readonly endpointId: string;
  readonly eventId: string;
  readonly eventType: string;
  readonly trigger: DeliveryTrigger;
}

const ClaimedRow = Schema.Struct({
  id: Schema.String,
  endpoint_id: Schema.String,
  event_id: Schema.String,
  attempt_count: Schema.Number,
  url: Schema.String,
  livemode: Schema.Boolean,
  secret_ciphertext: Schema.Uint8Array,
  previous_secret_ciphertext: Schema.NullOr(Schema.Uint8Array),
  previous_secret_expires_at: Schema.NullOr(Schema.Date),
  payload: EventObject,
});
export type ClaimedDelivery = typeof ClaimedRow.Type;
const decodeClaimed = decodeRows(ClaimedRow);

export const DeliveryRow = Schema.Struct({
  id: Schema.String,
  endpoint_id: Schema.String,
  event_id: Schema.String,
  event_type: Schema.String,
  trigger: Schema.Literals(TRIGGERS),
  status: Schema.Literals(DELIVERY_STATUSES),
  attempt_count: Schema.Number,
  next_attempt_at: Schema.NullOr(Schema.Date),
  created_at: Schema.Date,
  livemode: Schema.Boolean,
});
export type DeliveryRow = typeof DeliveryRow.Type;
const DELIVERIES = relation({
  from: "billing.webhook_deliveries d JOIN billing.webhook_endpoints w ON w.id = d.endpoint_id",
  alias: "d",
  // While a lease runs, the next try is no sooner than its end.
  columns: `d.id, d.endpoint_id, d.event_id, d.event_type, d.trigger, d.status, d.attempt_count,
    GREATEST(d.next_attempt_at, d.leased_until) AS next_attempt_at, d.created_at, w.livemode`,
  row: DeliveryRow,
});

export const AttemptRow = Schema.Struct({
  delivery_id: Schema.String,
  number: Schema.Number,
  attempted_at: Schema.Date,
  status_code: Schema.NullOr(Schema.Number),
  duration_ms: Schema.Number,
  error: Schema.NullOr(Schema.String),
  response_body: Schema.NullOr(Schema.String),
});
export type AttemptRow = typeof AttemptRow.Type;
const decodeAttempts = decodeRows(AttemptRow);
const decodeIds = decodeRows(Schema.Struct({ id: Schema.String }));
const decodeSubscribers = decodeRows(
  Schema.Struct({ endpoint_id: Schema.String, event_id: Schema.String, type: Schema.String }),
);

export interface RecordedOutcome {
  readonly deliveryId: string;
  readonly endpointId: string;
  /** This attempt's number (1 for the first). */
  readonly number: number;
  readonly attemptedAt: number;
  readonly outcome: AttemptOutcome;
}

export interface ClaimRequest {
  readonly now: number;
  readonly limit: number;
  readonly perEndpoint: number;
  readonly leaseMs: number;
  /** Deliveries this process has in flight, per endpoint (they count against `perEndpoint`). */
  readonly busy: ReadonlyMap<string, number>;
}

const make = Effect.gen(function* () {
  const sql = yield* PgClient.PgClient;

  /** Inserts deliveries due now and wakes the dispatchers on commit; returns their ids. */
  const insert = (deliveries: ReadonlyArray<NewDelivery>) =>
    Effect.gen(function* () {
      if (!Arr.isReadonlyArrayNonEmpty(deliveries)) return [] as string[];
      const now = yield* Clock.currentTimeMillis;
      const at = new Date(now);
      // One array per column, unnested, and no ON CONFLICT (ids are fresh, and fan-out sees each event
      // once: migration 0028). As a multi-row VALUES of 16,000 parameters whose every row was a
      // speculative insertion, 2,000 deliveries took Postgres 58 ms (bench:webhooks' burst); unnested,
      // 38 ms; without ON CONFLICT, 26–37 ms. The notification goes out with the insert, as the outbox's
      // does (see outbox.ts): Postgres sends it at commit, and only when a row was inserted.
      const inserted = yield* sql`
        WITH inserted AS (INSERT INTO billing.webhook_deliveries
            (id, endpoint_id, event_id, event_type, trigger, status, next_attempt_at, created_at)
          SELECT v.id, v.endpoint_id, v.event_id, v.event_type, v.trigger, 'pending', ${at}::timestamptz,
                 ${at}::timestamptz
          FROM unnest(${deliveries.map(() => freshId(ID_PREFIXES.webhookDelivery, now))}::text[],
                      ${deliveries.map((d) => d.endpointId)}::text[], ${deliveries.map((d) => d.eventId)}::text[],
                      ${deliveries.map((d) => d.eventType)}::text[], ${deliveries.map((d) => d.trigger)}::text[])
            AS v(id, endpoint_id, event_id, event_type, trigger)
          RETURNING id),
        notified AS (SELECT pg_notify(${DELIVERIES_CHANNEL}, '') FROM inserted HAVING count(*) > 0)
        SELECT id FROM inserted WHERE (SELECT count(*) FROM notified) >= 0`.pipe(Effect.flatMap(decodeIds));
      return inserted.map((row) => row.id);
    });

  /**
   * One delivery per enabled endpoint of the event's merchant and mode that subscribed to its type.
   * `webhook.test` goes only to the endpoint it tests, never by subscription. The events are matched as
   * given rather than read back, so the endpoints table is the only one this reads.
   */
  const fanOut = (events: ReadonlyArray<FannedEvent>) =>
    Effect.gen(function* () {
      if (events.length === 0) return;
      const subscribers = yield* sql`
        SELECT w.id AS endpoint_id, e.id AS event_id, e.type
        FROM unnest(${events.map((e) => e.id)}::text[], ${events.map((e) => e.merchantId)}::text[],
                    ${events.map((e) => e.livemode)}::boolean[], ${events.map((e) => e.type)}::text[])
             AS e(id, merchant_id, livemode, type)
        JOIN billing.webhook_endpoints w
          ON w.merchant_id = e.merchant_id AND w.livemode = e.livemode
         AND w.status = 'enabled' AND w.deleted_at IS NULL AND e.type = ANY (w.events)
        WHERE e.type <> 'webhook.test'`.pipe(Effect.flatMap(decodeSubscribers));
      yield* insert(
        subscribers.map((row) => ({
          endpointId: row.endpoint_id,
          eventId: row.event_id,
          eventType: row.type,
          trigger: "event" as const,
        })),
      );
    });

  /**
   * Leases up to `limit` due deliveries (pending, due, and not leased already), at most
   * `perEndpoint - busy[endpoint]` per endpoint, skipping rows another process is claiming right now.
   * Each endpoint with due deliveries gets its share before the overall limit cuts, so a backlog at one
   * endpoint does not starve the others.
   */
  const claimDue = (input: ClaimRequest) => {
    const now = new Date(input.now);
    const unleased = sql`(leased_until IS NULL OR leased_until <= ${now})`;
    const busy = JSON.stringify(Object.fromEntries(input.busy));
    return sql`
      WITH RECURSIVE due AS (
        -- The endpoints with due deliveries, by a skip scan of the due index: one probe per endpoint
        -- rather than a read of every due row. Leased rows are left to \`picked\`: they come first in the
        -- index (the oldest due), and stepping over them here too made a claim in a backlog take 1.8 ms
        -- rather than 0.7 (bench:webhooks, burst).
        (SELECT endpoint_id FROM billing.webhook_deliveries
         WHERE status = 'pending' AND next_attempt_at <= ${now} ORDER BY endpoint_id LIMIT 1)
        UNION ALL
        SELECT (SELECT d.endpoint_id FROM billing.webhook_deliveries d
                WHERE d.status = 'pending' AND d.next_attempt_at <= ${now}
                  AND d.endpoint_id > due.endpoint_id
                ORDER BY d.endpoint_id LIMIT 1)
        FROM due WHERE due.endpoint_id IS NOT NULL
      ), busy AS (
        SELECT key AS endpoint_id, value::int AS n FROM jsonb_each_text(${busy}::jsonb)
      ), eligible AS MATERIALIZED (
        SELECT w.id, ${input.perEndpoint}::int - COALESCE(b.n, 0) AS room
        FROM due
        JOIN billing.webhook_endpoints w
          ON w.id = due.endpoint_id AND w.status = 'enabled' AND w.deleted_at IS NULL
        LEFT JOIN busy b ON b.endpoint_id = w.id
        WHERE ${input.perEndpoint}::int - COALESCE(b.n, 0) > 0
      ), picked AS (
        SELECT p.id FROM eligible e CROSS JOIN LATERAL (
          SELECT d.id FROM billing.webhook_deliveries d
          WHERE d.endpoint_id = e.id AND d.status = 'pending' AND d.next_attempt_at <= ${now} AND ${unleased}
          ORDER BY d.next_attempt_at
          LIMIT e.room
          FOR UPDATE SKIP LOCKED
        ) p
        LIMIT ${input.limit}
      ), claimed AS (
        -- Only the lease changes: a column outside every index, so a HOT update (migration 0016).
        UPDATE billing.webhook_deliveries d SET leased_until = ${new Date(input.now + input.leaseMs)}
        FROM picked WHERE d.id = picked.id
        RETURNING d.id, d.endpoint_id, d.event_id, d.attempt_count
      ), relaxed AS MATERIALIZED (
        -- A lease lost in a crash is a lease expired early: the claim need not wait for its WAL flush.
        SELECT set_config('synchronous_commit', 'off', true)
      )
      SELECT c.id, c.endpoint_id, c.event_id, c.attempt_count, w.url, w.livemode, w.secret_ciphertext,
             w.previous_secret_ciphertext, w.previous_secret_expires_at, ev.payload
      FROM relaxed, claimed c
      JOIN billing.webhook_endpoints w ON w.id = c.endpoint_id
      JOIN billing.events ev ON ev.id = c.event_id`.pipe(Effect.flatMap(decodeClaimed));
  };

  /**
   * Writes attempts and delivery states in one statement. A delivery already moved on (a lease that
   * expired and was re-sent elsewhere, or an endpoint deleted meanwhile) keeps its state; the attempt is
   * still recorded. `random` draws the retry jitter.
   */
  const recordOutcomes = (outcomes: ReadonlyArray<RecordedOutcome>, random: () => number) => {
    if (outcomes.length === 0) return Effect.void;
    const next = outcomes.map((o) => nextState(o.number, o.outcome.ok, o.attemptedAt, random()));
    const ids = outcomes.map((o) => o.deliveryId);
    // One array per column, unnested together (nullable ones may be all null: see nullableArray).
    const numbers = outcomes.map((o) => o.number);
    const attemptedAt = outcomes.map((o) => new Date(o.attemptedAt));
    const statusCodes = nullableArray(
      sql,
      outcomes.map((o) => o.outcome.statusCode),
      "int",
    );
    const durations = outcomes.map((o) => o.outcome.durationMs);
    const errors = nullableArray(
      sql,
      outcomes.map((o) => o.outcome.error),
      "text",
    );
    const bodies = nullableArray(
      sql,
      outcomes.map((o) => o.outcome.responseBody),
      "text",
    );
    const statuses = next.map((state) => state.status);
    const nextAttemptAt = nullableArray(
      sql,
      next.map((state) => (state.nextAttemptAt === null ? null : new Date(state.nextAttemptAt))),
      "timestamptz",
    );
    return Effect.asVoid(sql`
      WITH input AS (
        SELECT * FROM unnest(${ids}::text[], ${numbers}::int[], ${attemptedAt}::timestamptz[], ${statusCodes},
                             ${durations}::int[], ${errors}, ${bodies}, ${statuses}::text[], ${nextAttemptAt})
          AS v(id, number, attempted_at, status_code, duration_ms, error, response_body, status, next_attempt_at)
      ), updated AS (
        -- Guarded per column rather than in WHERE, and the ids given as an array too, so that the rows are
        -- found by their primary key whatever the planner believes about the table (a join on the
        -- input alone was planned as a sequential scan of every delivery).
        UPDATE billing.webhook_deliveries d
        SET status = CASE WHEN d.status = 'pending' AND d.attempt_count = v.number - 1 THEN v.status ELSE d.status END,
            next_attempt_at = CASE WHEN d.status = 'pending' AND d.attempt_count = v.number - 1
                                   THEN v.next_attempt_at ELSE d.next_attempt_at END,
            last_attempt_at = CASE WHEN d.status = 'pending' AND d.attempt_count = v.number - 1
                                   THEN v.attempted_at ELSE d.last_attempt_at END,
            leased_until = CASE WHEN d.status = 'pending' AND d.attempt_count = v.number - 1
                                THEN NULL ELSE d.leased_until END,
            attempt_count = CASE WHEN d.status = 'pending' AND d.attempt_count = v.number - 1
                                 THEN v.number ELSE d.attempt_count END
        FROM input v
        WHERE d.id = ANY (${ids}::text[]) AND d.id = v.id
        RETURNING d.id
      )
      -- An attempt is written only beside the delivery row this statement updated (and so locked): that,
      -- and forgetEvents deleting deliveries before their attempts, is the attempts' reference to their
      -- delivery, without a foreign-key check per row (migration 0018).
      INSERT INTO billing.webhook_attempts
        (delivery_id, number, attempted_at, status_code, duration_ms, error, response_body)
      SELECT v.id, v.number, v.attempted_at, v.status_code, v.duration_ms, v.error, v.response_body
      FROM input v JOIN updated u ON u.id = v.id
      ON CONFLICT DO NOTHING`);
  };

  return {
    insert,
    fanOut,
    claimDue,
    recordOutcomes,
    /** Looked at again at `at` without counting an attempt (the deployment could not send it). */
    defer: (id: string, at: number) =>
      Effect.asVoid(sql`UPDATE billing.webhook_deliveries SET next_attempt_at = ${new Date(at)},
        leased_until = NULL WHERE id = ${id} AND status = 'pending'`),
    /** Nothing more is sent to a deleted endpoint. */
    failPendingOf: (endpointId: string) =>
      Effect.asVoid(sql`UPDATE billing.webhook_deliveries
        SET status = 'failed', next_attempt_at = NULL, leased_until = NULL
        WHERE endpoint_id = ${endpointId} AND status = 'pending'`),
    /** The endpoint's deliveries, newest first, filtered by status and event. */
    pageForEndpoint: (
      endpointId: string,
      filters: { readonly status?: string; readonly event?: string },
      page: PageRequest,
    ) =>
      pageRows(
        sql,
        DELIVERIES,
        [
          sql`d.endpoint_id = ${endpointId}`,
          ...(filters.status !== undefined ? [sql`d.status = ${filters.status}`] : []),
          ...(filters.event !== undefined ? [sql`d.event_id = ${filters.event}`] : []),
        ],
        page,
      ),
    /** The deliveries named, newest first. */
    byIds: (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.succeed([] as ReadonlyArray<DeliveryRow>)
        : sql`SELECT ${DELIVERIES.columns} FROM ${DELIVERIES.from} WHERE d.id = ANY (${ids}::text[])
            ORDER BY d.id DESC`.pipe(Effect.flatMap(DELIVERIES.decode)),
    /** The attempts of the deliveries named, oldest first. */
    attemptsOf: (ids: ReadonlyArray<string>) =>
      ids.length === 0
        ? Effect.succeed([] as ReadonlyArray<AttemptRow>)
        : sql`SELECT delivery_id, number, attempted_at, status_code, duration_ms, error, response_body
            FROM billing.webhook_attempts WHERE delivery_id = ANY (${ids}::text[])
            ORDER BY attempted_at, number`.pipe(Effect.flatMap(decodeAttempts)),
    /**
     * Deletes the deliveries of these events with their attempts (the local stack's crash recovery), in
     * the transaction that deletes the events. The events are locked first, so a replay either committed
     * its deliveries before (they are deleted here) or finds its event gone (see Deliveries.replay).
     * Deliveries before attempts: an outcome recorded meanwhile either waited for this delete and wrote
     * nothing, or committed before it, and then its attempt is deleted here too (see recordOutcomes).
     */
    forgetEvents: (eventIds: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        yield* sql`SELECT id FROM billing.events WHERE id = ANY (${eventIds}::text[]) ORDER BY id FOR UPDATE`;
        const deleted =
          yield* sql`DELETE FROM billing.webhook_deliveries WHERE event_id = ANY (${eventIds}::text[])
          RETURNING id`.pipe(Effect.flatMap(decodeIds));
        if (deleted.length === 0) return;
        yield* sql`DELETE FROM billing.webhook_attempts
          WHERE delivery_id = ANY (${deleted.map((row) => row.id)}::text[])`;
      }),
  };
});

export class DeliveryStore extends Context.Service<DeliveryStore>()("DeliveryStore", { make }) {
  static readonly layer = Layer.effect(DeliveryStore, make);
}
