/**
 * The dispatcher: sends due deliveries and records every attempt. Claims are leases, not open
 * transactions: a claim sets the delivery's lease (leased_until) past the attempt's time limit, so a process
 * that dies mid-send leaves deliveries that fall due again and are re-sent by whichever process is alive
 * (at least once; receivers deduplicate on the event id). Outcomes are written in batches, one statement
 * per batch (attempt rows and delivery states together).
 *
 * Concurrency is bounded per process and per endpoint: each endpoint's claimed deliveries are sent by
 * at most maxInFlightPerEndpoint loops of its own, so a slow or dead endpoint holds only its own slots
 * and never delays another endpoint's deliveries. A claim takes at most each endpoint's free share, and
 * runs up to CLAIM_AHEAD sends' worth ahead, so a freed slot starts its next send without a round trip
 * (the lease covers the wait). Claims are woken when worth a round trip: by notification for new
 * deliveries, by the poll for retries, and by a finished send only when its endpoint filled its share at
 * the last claim and is down to half of it.
 */
import { Clock, Effect, FiberSet, Layer, Queue, Result, Schedule } from "effect";
import { wakeUps } from "../db/notifications.ts";
import { recordMetric } from "../metrics/metrics.ts";
import {
  type ClaimedDelivery,
  DELIVERIES_CHANNEL,
  DeliveryStore,
  type RecordedOutcome,
} from "./delivery-store.ts";
import { SecretBox, type SecretUnreadable } from "./secret-box.ts";
import { AttemptSender } from "./sender.ts";
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

/** A claimed delivery ready to sign and send, its secrets opened and its event's body encoded. */
interface Ready {
  readonly row: ClaimedDelivery;
  /** The exact bytes sent: one buffer for all the event's deliveries in a claim. */
  readonly body: Buffer;
  readonly secret: string;
  /** The secret before a rotation, signed with too until it expires. */
  readonly previous: { readonly secret: string; readonly expiresAt: number } | undefined;
}

const openSecrets = (row: ClaimedDelivery, now: number) =>
  Effect.gen(function* () {
    const box = yield* SecretBox;
    const secret = yield* box.open(row.secret_ciphertext, row.endpoint_id);
    const expiresAt = row.previous_secret_expires_at?.getTime();
    if (row.previous_secret_ciphertext === null || expiresAt === undefined || expiresAt <= now)
      return { secret, previous: undefined };
    const previous = yield* box.open(row.previous_secret_ciphertext, row.endpoint_id);
    return { secret, previous: { secret: previous, expiresAt } };
  });

/**
 * Readies a claim's deliveries: secrets opened once per endpoint, each event's body encoded once. A
 * secret that does not decrypt is the deployment's fault, not the endpoint's: that endpoint's deliveries
 * count no attempt and are looked at again after a minute.
 */
const prepareClaim = (claimed: ReadonlyArray<ClaimedDelivery>, now: number) =>
  Effect.gen(function* () {
    const store = yield* DeliveryStore;
    // A claim reads each endpoint's row once, so its deliveries carry the same secrets.
    const secrets = new Map<
      string,
      Result.Result<Effect.Success<ReturnType<typeof openSecrets>>, SecretUnreadable>
    >();
    const bodies = new Map<string, Buffer>();
    const ready: Ready[] = [];
    for (const row of claimed) {
      let opened = secrets.get(row.endpoint_id);
      if (opened === undefined) {
        opened = yield* Effect.result(openSecrets(row, now));
        secrets.set(row.endpoint_id, opened);
      }
      if (Result.isFailure(opened)) {
        yield* Effect.logError("webhook delivery not sent", opened.failure.message).pipe(
          Effect.annotateLogs({ delivery: row.id }),
        );
        yield* store.defer(row.id, now + 60_000).pipe(Effect.ignore);
        continue;
      }
      let body = bodies.get(row.event_id);
      if (body === undefined) {
        body = Buffer.from(JSON.stringify(row.payload), "utf8");
        bodies.set(row.event_id, body);
      }
      ready.push({ row, body, ...opened.success });
    }
    return ready;
  });

/**
 * One attempt, signed at `now`. A plain promise rather than an Effect: it is the per-delivery hot path,
 * and the sender never rejects (every failure is an outcome), so nothing here needs the runtime.
 */
const attemptReady = async (
  sender: AttemptSender["Service"],
  ready: Ready,
  now: number,
  options: DispatcherOptions,
): Promise<RecordedOutcome> => {
  const { row, body, previous } = ready;
  const secrets =
    previous !== undefined && previous.expiresAt > now ? [ready.secret, previous.secret] : [ready.secret];
  const outcome = await sender.send({
    url: row.url,
    body,
    headers: {
      "content-type": "application/json",
      "user-agent": "mandate-billing-webhooks/1",
      [SIGNATURE_HEADER_NAME]: signatureHeader(Math.floor(now / 1000), body, secrets),
    },
    allowPrivate: !row.livemode && options.allowPrivateInTest,
  });
  return {
    deliveryId: row.id,
    endpointId: row.endpoint_id,
    number: row.attempt_count + 1,
    attemptedAt: now,
    outcome,
  };
};
const SIGNATURE_HEADER_NAME = SIGNATURE_HEADER.toLowerCase();

const SUCCESS = { outcome: "success" } as const;
const FAILURE = { outcome: "failure" } as const;
/** The attempts' durations, observed once per recorded batch. */
const observeAttempts = (recorded: ReadonlyArray<RecordedOutcome>) =>
  recordMetric((m) => {
    for (const { outcome } of recorded)
      m.webhookAttemptDuration.observe(outcome.ok ? SUCCESS : FAILURE, outcome.durationMs / 1000);
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
    const store = yield* DeliveryStore;
    const sender = yield* AttemptSender;
    const now = yield* Clock.currentTimeMillis;
    const claimed = yield* store.claimDue({
      now,
      limit: options.maxInFlight,
      perEndpoint: options.maxInFlightPerEndpoint,
      leaseMs: leaseMs(options),
      busy: new Map(),
    });
    const ready = yield* prepareClaim(claimed, now);
    const recorded = yield* Effect.promise(() =>
      Promise.all(ready.map((delivery) => attemptReady(sender, delivery, now, options))),
    );
    yield* observeAttempts(recorded);
    yield* store.recordOutcomes(recorded, options.random ?? Math.random);
    return recorded;
  });

const RECORD_BATCH = 500;

/** The long-running dispatcher of a process: started with its runtime, interrupted when it stops. */
export const dispatcherLayer = (options: DispatcherOptions) =>
  Layer.effectDiscard(
    Effect.gen(function* () {
      const random = options.random ?? Math.random;
      const store = yield* DeliveryStore;
      const sender = yield* AttemptSender;
      const clock = yield* Clock.Clock;
      const wake = yield* Queue.unbounded<void>();
      const results = yield* Queue.unbounded<RecordedOutcome>();
      // Deliveries claimed and not yet finished, per endpoint, in this process. Claims run ahead of sends
      // (up to CLAIM_AHEAD times the per-endpoint bound) into the endpoint's queue, which at most
      // maxInFlightPerEndpoint sender loops empty, so a freed slot starts its next send without waiting
      // for a round trip to Postgres. (With a fiber per delivery parked on a semaphore instead, the
      // burst of bench:webhooks was 9–20 % slower.)
      const busy = new Map<string, number>();
      const queued = new Map<string, Ready[]>();
      const senders = new Map<string, number>();
      let inFlight = 0;
      const fibers = yield* FiberSet.make();

      const adjust = (endpointId: string, by: number) => {
        const count = (busy.get(endpointId) ?? 0) + by;
        if (count > 0) busy.set(endpointId, count);
        else busy.delete(endpointId);
        inFlight += by;
      };

      // A finished send asks for a claim only when one is worth its round trip: its endpoint filled its
      // share at the last claim (more may be due) and is down to half of it, or the process was at its
      // overall limit. Waking on every send kept claims running back to back, a statement per few
      // deliveries; new deliveries and retries wake the loop by notification and by the poll anyway.
      const claimAhead = CLAIM_AHEAD * options.maxInFlightPerEndpoint;
      const refillAt = claimAhead / 2;
      let mayHaveMore = new Set<string>();
      const finished = (endpointId: string) => {
        const saturated = inFlight >= options.maxInFlight;
        adjust(endpointId, -1);
        if (saturated || (mayHaveMore.has(endpointId) && (busy.get(endpointId) ?? 0) <= refillAt))
          Queue.offerUnsafe(wake, undefined);
      };

      // One sender loop of an endpoint: sends its queued deliveries one at a time until none is left (or
      // the dispatcher stops). The endpoint's slot is free once it has answered; recording is batched
      // behind it (the lease, longer than every send queued before it, keeps it from being claimed again).
      // A plain async loop: Effect's runtime around each send was most of the dispatcher's own CPU.
      const drain = async (endpointId: string, signal: AbortSignal) => {
        for (;;) {
          const next = signal.aborted ? undefined : queued.get(endpointId)?.shift();
          if (next === undefined) break;
          try {
            const outcome = await attemptReady(sender, next, clock.currentTimeMillisUnsafe(), options);
            Queue.offerUnsafe(results, outcome);
          } finally {
            finished(endpointId);
          }
        }
        const left = (senders.get(endpointId) ?? 1) - 1;
        if (left > 0) senders.set(endpointId, left);
        else {
          senders.delete(endpointId);
          queued.delete(endpointId);
        }
      };
      // A defect in one send must not stop the loop: it is logged and the loop goes on with the next
      // delivery (this one's lease runs out and it is sent again).
      const sendQueued = (endpointId: string): Effect.Effect<void> =>
        Effect.promise((signal) => drain(endpointId, signal)).pipe(
          Effect.catchCause((cause) =>
            Effect.logError("webhook send failed", cause).pipe(
              Effect.andThen(Effect.suspend(() => sendQueued(endpointId))),
            ),
          ),
        );

      const notifications = yield* wakeUps(DELIVERIES_CHANNEL);
      yield* Effect.forkScoped(
        Queue.take(notifications).pipe(Effect.andThen(Queue.offer(wake, undefined)), Effect.forever),
      );

      const claimLoop = Effect.gen(function* () {
        const free = options.maxInFlight - inFlight;
        if (free > 0) {
          const busyBefore = new Map(busy);
          const now = clock.currentTimeMillisUnsafe();
          const claimed = yield* store.claimDue({
            now,
            limit: free,
            perEndpoint: claimAhead,
            leaseMs: runningLeaseMs(options),
            busy: busyBefore,
          });
          const counts = new Map<string, number>();
          for (const row of claimed) counts.set(row.endpoint_id, (counts.get(row.endpoint_id) ?? 0) + 1);
          // Full shares, and endpoints that had no room to be asked about, may have more due.
          const next = new Set<string>();
          for (const [endpointId, n] of busyBefore)
            if (n >= claimAhead && mayHaveMore.has(endpointId)) next.add(endpointId);
          for (const [endpointId, n] of counts)
            if (n >= claimAhead - (busyBefore.get(endpointId) ?? 0)) next.add(endpointId);
          mayHaveMore = next;
          for (const ready of yield* prepareClaim(claimed, now)) {
            adjust(ready.row.endpoint_id, 1);
            const queue = queued.get(ready.row.endpoint_id);
            if (queue) queue.push(ready);
            else queued.set(ready.row.endpoint_id, [ready]);
          }
          for (const endpointId of counts.keys()) {
            const start = Math.min(
              options.maxInFlightPerEndpoint - (senders.get(endpointId) ?? 0),
              queued.get(endpointId)?.length ?? 0,
            );
            for (let i = 0; i < start; i++) {
              senders.set(endpointId, (senders.get(endpointId) ?? 0) + 1);
              yield* FiberSet.run(fibers, sendQueued(endpointId));
            }
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
        yield* observeAttempts(batch);
        // A failed write is retried, not dropped; should this process die first, the leases run out
        // and the deliveries are sent again.
        yield* store.recordOutcomes(batch, random).pipe(
          Effect.tapCause((cause) => Effect.logWarning("webhook outcomes not recorded yet", cause)),
          Effect.retry({ schedule: Schedule.spaced("1 second") }),
        );
      }).pipe(Effect.forever);

      yield* Effect.forkScoped(recordLoop);
      yield* Effect.forkScoped(claimLoop);
      yield* Effect.logInfo("webhook dispatcher started");
    }).pipe(Effect.annotateLogs({ worker: "webhook-dispatcher" })),
  );
