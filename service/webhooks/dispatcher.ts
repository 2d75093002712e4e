/**
 * The dispatcher: sends due deliveries and records every attempt. Claims are leases, not open
 * transactions: a claim moves the delivery's next_attempt_at past the attempt's time limit, so a process
 * that dies mid-send leaves deliveries that fall due again and are re-sent by whichever process is alive
 * (at least once; receivers deduplicate on the event id). Outcomes are written in batches, one statement
 * per batch (attempt rows and delivery states together).
 *
 * Concurrency is bounded per process and per endpoint, and each send is its own fiber, so a slow or
 * dead endpoint holds only its own slots and never delays another endpoint's deliveries.
 */
import { Clock, Effect, FiberSet, Layer, Queue, Schedule, Schema, Semaphore } from "effect";
import { SqlClient } from "effect/sql";
import { wakeUps } from "../db/notifications.ts";
import { decodeRows } from "../db/rows.ts";
import { EventObject } from "../events/events.ts";
import { recordMetric } from "../metrics/metrics.ts";
import { DELIVERIES_CHANNEL } from "./fan-out.ts";
import { nextState } from "./retry-schedule.ts";
import { SecretBox } from "./secret-box.ts";
import { type AttemptOutcome, AttemptSender } from "./sender.ts";
import { SIGNATURE_HEADER, signatureHeader } from "./signature.ts";

export interface DispatcherOptions {
  readonly maxInFlight: number;
  readonly maxInFlightPerEndpoint: number;
  readonly timeoutMs: number;
  /** Test-mode endpoints may be dialled at private addresses (a local deployment). */
  readonly allowPrivateInTest: boolean;
  /** Longest wait between looks for deliveries falling due (retries); new ones wake it at once. */
  readonly pollIntervalMs?: number;
  /** Source of retry jitter in [0, 1). */
  readonly random?: () => number;
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

/**
 * Leases up to `limit` due deliveries, at most `perEndpoint - busy[endpoint]` per endpoint, skipping rows
 * another process is claiming right now. Each endpoint with due deliveries gets its share before the
 * overall limit cuts, so a backlog at one endpoint does not starve the others.
 */
const claimDue = (input: {
  readonly now: number;
  readonly limit: number;
  readonly perEndpoint: number;
  readonly leaseMs: number;
  readonly busy: ReadonlyMap<string, number>;
}) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient;
    const now = new Date(input.now);
    const busy = JSON.stringify(Object.fromEntries(input.busy));
    return yield* sql`
      WITH RECURSIVE due AS (
        -- The endpoints with due deliveries, by a skip scan of the due index: one probe per endpoint
        -- rather than a read of every due row.
        (SELECT endpoint_id FROM billing.webhook_deliveries
         WHERE status = 'pending' AND next_attempt_at <= ${now} ORDER BY endpoint_id LIMIT 1)
        UNION ALL
        SELECT (SELECT d.endpoint_id FROM billing.webhook_deliveries d
                WHERE d.status = 'pending' AND d.next_attempt_at <= ${now} AND d.endpoint_id > due.endpoint_id
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
          WHERE d.endpoint_id = e.id AND d.status = 'pending' AND d.next_attempt_at <= ${now}
          ORDER BY d.next_attempt_at
          LIMIT e.room
          FOR UPDATE SKIP LOCKED
        ) p
        LIMIT ${input.limit}
      ), claimed AS (
        UPDATE billing.webhook_deliveries d SET next_attempt_at = ${new Date(input.now + input.leaseMs)}
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
  });

export interface RecordedOutcome {
  readonly deliveryId: string;
  readonly endpointId: string;
  /** This attempt's number (1 for the first). */
  readonly number: number;
  readonly attemptedAt: number;
  readonly outcome: AttemptOutcome;
}

/** Writes attempts and delivery states in one statement. A delivery already moved on (a lease that
 * expired and was re-sent elsewhere, or an endpoint deleted meanwhile) keeps its state; the attempt is
 * still recorded. */
const recordOutcomes = (outcomes: readonly RecordedOutcome[], random: () => number) =>
  Effect.gen(function* () {
    if (outcomes.length === 0) return;
    const sql = yield* SqlClient.SqlClient;
    const rows = outcomes.map((o) => {
      const next = nextState(o.number, o.outcome.ok, o.attemptedAt, random());
      return {
        id: o.deliveryId,
        number: o.number,
        attempted_at: new Date(o.attemptedAt).toISOString(),
        status_code: o.outcome.statusCode,
        duration_ms: o.outcome.durationMs,
        error: o.outcome.error,
        response_body: o.outcome.responseBody,
        status: next.status,
        next_attempt_at: next.nextAttemptAt === null ? null : new Date(next.nextAttemptAt).toISOString(),
      };
    });
    yield* sql`
      WITH input AS (
        SELECT * FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS v(
          id text, number int, attempted_at timestamptz, status_code int, duration_ms int, error text,
          response_body text, status text, next_attempt_at timestamptz)
      ), attempts AS (
        INSERT INTO billing.webhook_attempts
          (delivery_id, number, attempted_at, status_code, duration_ms, error, response_body)
        SELECT id, number, attempted_at, status_code, duration_ms, error, response_body FROM input
        ON CONFLICT DO NOTHING
      )
      -- Guarded per column rather than in WHERE, and the ids given as an array too, so that the rows are
      -- found by their primary key whatever the planner believes about the table (a join on the
      -- recordset alone was planned as a sequential scan of every delivery).
      UPDATE billing.webhook_deliveries d
      SET status = CASE WHEN d.status = 'pending' AND d.attempt_count = v.number - 1 THEN v.status ELSE d.status END,
          next_attempt_at = CASE WHEN d.status = 'pending' AND d.attempt_count = v.number - 1
                                 THEN v.next_attempt_at ELSE d.next_attempt_at END,
          last_attempt_at = CASE WHEN d.status = 'pending' AND d.attempt_count = v.number - 1
                                 THEN v.attempted_at ELSE d.last_attempt_at END,
          attempt_count = CASE WHEN d.status = 'pending' AND d.attempt_count = v.number - 1
                               THEN v.number ELSE d.attempt_count END
      FROM input v
      WHERE d.id = ANY (${rows.map((row) => row.id)}::text[]) AND d.id = v.id`;
  });

/** The exact bytes sent, and the signature header over them (both secrets during a rotation overlap). */
const buildAttempt = (claimed: ClaimedDelivery, now: number, options: DispatcherOptions) =>
  Effect.gen(function* () {
    const box = yield* SecretBox;
    const secrets = [yield* box.open(claimed.secret_ciphertext, claimed.endpoint_id)];
    if (
      claimed.previous_secret_ciphertext &&
      claimed.previous_secret_expires_at &&
      claimed.previous_secret_expires_at.getTime() > now
    )
      secrets.push(yield* box.open(claimed.previous_secret_ciphertext, claimed.endpoint_id));
    const body = JSON.stringify(claimed.payload);
    return {
      url: claimed.url,
      body,
      headers: {
        "content-type": "application/json",
        "user-agent": "mandate-billing-webhooks/1",
        [SIGNATURE_HEADER.toLowerCase()]: signatureHeader(Math.floor(now / 1000), body, secrets),
      },
      allowPrivate: !claimed.livemode && options.allowPrivateInTest,
    };
  });

/** One attempt of a claimed delivery. A secret that does not decrypt is the deployment's fault, not the
 * endpoint's: no attempt is counted and the delivery is looked at again after a minute. */
const attemptDelivery = (claimed: ClaimedDelivery, options: DispatcherOptions) =>
  Effect.gen(function* () {
    const sender = yield* AttemptSender;
    const now = yield* Clock.currentTimeMillis;
    const attempt = yield* Effect.result(buildAttempt(claimed, now, options));
    if (attempt._tag === "Failure") {
      yield* Effect.logError("webhook delivery not sent", attempt.failure.message).pipe(
        Effect.annotateLogs({ delivery: claimed.id }),
      );
      const sql = yield* SqlClient.SqlClient;
      yield* sql`UPDATE billing.webhook_deliveries SET next_attempt_at = ${new Date(now + 60_000)}
                 WHERE id = ${claimed.id} AND status = 'pending'`.pipe(Effect.ignore);
      return undefined;
    }
    const outcome = yield* sender.send(attempt.success);
    yield* recordMetric((m) =>
      m.webhookAttemptDuration.observe(
        { outcome: outcome.ok ? "success" : "failure" },
        outcome.durationMs / 1000,
      ),
    );
    return {
      deliveryId: claimed.id,
      endpointId: claimed.endpoint_id,
      number: claimed.attempt_count + 1,
      attemptedAt: now,
      outcome,
    } satisfies RecordedOutcome;
  });

const leaseMs = (options: DispatcherOptions) => options.timeoutMs + 10_000;

/** How many sends' worth of deliveries the running dispatcher claims ahead for one endpoint. */
const CLAIM_AHEAD = 4;
/** A claimed delivery may wait behind the sends claimed before it, each up to the time limit. */
const runningLeaseMs = (options: DispatcherOptions) => CLAIM_AHEAD * options.timeoutMs + 20_000;

/**
 * One complete pass: claim what is due, send it all, record it all. The running dispatcher pipelines
 * these steps; this form is for tests that drive time themselves.
 */
export const deliverDue = (options: DispatcherOptions) =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis;
    const claimed = yield* claimDue({
      now,
      limit: options.maxInFlight,
      perEndpoint: options.maxInFlightPerEndpoint,
      leaseMs: leaseMs(options),
      busy: new Map(),
    });
    const outcomes = yield* Effect.forEach(claimed, (row) => attemptDelivery(row, options), {
      concurrency: "unbounded",
    });
    const recorded = outcomes.filter((o): o is RecordedOutcome => o !== undefined);
    yield* recordOutcomes(recorded, options.random ?? Math.random);
    return recorded;
  });

const RECORD_BATCH = 500;

/** The long-running dispatcher of a process: started with its runtime, interrupted when it stops. */
export const dispatcherLayer = (options: DispatcherOptions) =>
  Layer.effectDiscard(
    Effect.gen(function* () {
      const random = options.random ?? Math.random;
      const wake = yield* Queue.unbounded<void>();
      const results = yield* Queue.unbounded<RecordedOutcome>();
      // Deliveries claimed and not yet finished, per endpoint, in this process; and each endpoint's
      // semaphore of in-flight sends. Claims run ahead of sends (up to CLAIM_AHEAD times the per-endpoint
      // bound), so a freed slot starts its next send without waiting for a round trip to Postgres.
      const busy = new Map<string, number>();
      const slots = new Map<string, Semaphore.Semaphore>();
      let inFlight = 0;
      const fibers = yield* FiberSet.make();

      const adjust = (endpointId: string, by: number) =>
        Effect.sync(() => {
          const count = (busy.get(endpointId) ?? 0) + by;
          if (count > 0) busy.set(endpointId, count);
          else {
            busy.delete(endpointId);
            slots.delete(endpointId);
          }
          inFlight += by;
        });
      const slotsOf = (endpointId: string) => {
        const existing = slots.get(endpointId);
        if (existing) return existing;
        const created = Semaphore.makeUnsafe(options.maxInFlightPerEndpoint);
        slots.set(endpointId, created);
        return created;
      };

      const notifications = yield* wakeUps(DELIVERIES_CHANNEL);
      yield* Effect.forkScoped(
        Queue.take(notifications).pipe(Effect.andThen(Queue.offer(wake, undefined)), Effect.forever),
      );

      const claimLoop = Effect.gen(function* () {
        const free = options.maxInFlight - inFlight;
        if (free > 0) {
          const claimed = yield* claimDue({
            now: yield* Clock.currentTimeMillis,
            limit: free,
            perEndpoint: CLAIM_AHEAD * options.maxInFlightPerEndpoint,
            leaseMs: runningLeaseMs(options),
            busy,
          });
          for (const row of claimed) {
            yield* adjust(row.endpoint_id, 1);
            // The endpoint's slot is free once it has answered; recording is batched behind it (the
            // lease, longer than every send queued before it, keeps it from being claimed again).
            yield* FiberSet.run(
              fibers,
              slotsOf(row.endpoint_id)
                .withPermits(1)(attemptDelivery(row, options))
                .pipe(
                  Effect.flatMap((outcome) => (outcome ? Queue.offer(results, outcome) : Effect.void)),
                  Effect.ensuring(
                    adjust(row.endpoint_id, -1).pipe(Effect.andThen(Queue.offer(wake, undefined))),
                  ),
                ),
            );
          }
          if (claimed.length === free) return; // more may be due: look again at once
        }
        yield* Queue.take(wake).pipe(
          Effect.andThen(Queue.clear(wake)),
          Effect.timeoutOption(options.pollIntervalMs ?? 1000),
        );
      }).pipe(
        Effect.catchCause((cause) =>
          Effect.logWarning("webhook claim failed", cause).pipe(Effect.andThen(Effect.sleep("1 second"))),
        ),
        Effect.forever,
      );

      const recordLoop = Effect.gen(function* () {
        const batch = yield* Queue.takeBetween(results, 1, RECORD_BATCH);
        // A failed write is retried, not dropped; should this process die first, the leases run out
        // and the deliveries are sent again.
        yield* recordOutcomes(batch, random).pipe(
          Effect.tapCause((cause) => Effect.logWarning("webhook outcomes not recorded yet", cause)),
          Effect.retry({ schedule: Schedule.spaced("1 second") }),
        );
      }).pipe(Effect.forever);

      yield* Effect.forkScoped(recordLoop);
      yield* Effect.forkScoped(claimLoop);
      yield* Effect.logInfo("webhook dispatcher started");
    }).pipe(Effect.annotateLogs({ worker: "webhook-dispatcher" })),
  );
