/**
 * The dispatcher: sends due deliveries and records every attempt. Claims are leases, not open
 * transactions: a claim sets the delivery's lease (leased_until) past the attempt's time limit, so a process
 * that dies mid-send leaves deliveries that fall due again and are re-sent by whichever process is alive
 * (at least once; receivers deduplicate on the event id). Outcomes are written in batches, one statement
 * per batch (attempt rows and delivery states together).
 *
 * Concurrency is bounded per process and per endpoint: each endpoint's claimed deliveries are sent by
 * at most maxInFlightPerEndpoint loops of its own, so a slow or dead endpoint holds only its own slots
 * and never delays another endpoint's deliveries.
 */
import { Clock, Effect, FiberSet, Layer, Queue, Schedule } from "effect";
import { wakeUps } from "../db/notifications.ts";
import { recordMetric } from "../metrics/metrics.ts";
import {
  type ClaimedDelivery,
  DELIVERIES_CHANNEL,
  DeliveryStore,
  type RecordedOutcome,
} from "./delivery-store.ts";
import { SecretBox } from "./secret-box.ts";
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

/** Encodes each event's body once for all its endpoints' deliveries in one claim. */
const makeBodies = () => {
  const bodies = new Map<string, string>();
  return (claimed: ClaimedDelivery): string => {
    const hit = bodies.get(claimed.event_id);
    if (hit !== undefined) return hit;
    const body = JSON.stringify(claimed.payload);
    bodies.set(claimed.event_id, body);
    return body;
  };
};
type Bodies = ReturnType<typeof makeBodies>;

/** The exact bytes sent, and the signature header over them (both secrets during a rotation overlap). */
const buildAttempt = (claimed: ClaimedDelivery, now: number, options: DispatcherOptions, bodyOf: Bodies) =>
  Effect.gen(function* () {
    const box = yield* SecretBox;
    const secrets = [yield* box.open(claimed.secret_ciphertext, claimed.endpoint_id)];
    if (
      claimed.previous_secret_ciphertext &&
      claimed.previous_secret_expires_at &&
      claimed.previous_secret_expires_at.getTime() > now
    )
      secrets.push(yield* box.open(claimed.previous_secret_ciphertext, claimed.endpoint_id));
    const body = bodyOf(claimed);
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
const attemptDelivery = (claimed: ClaimedDelivery, options: DispatcherOptions, bodyOf: Bodies) =>
  Effect.gen(function* () {
    const sender = yield* AttemptSender;
    const now = yield* Clock.currentTimeMillis;
    const attempt = yield* Effect.result(buildAttempt(claimed, now, options, bodyOf));
    if (attempt._tag === "Failure") {
      yield* Effect.logError("webhook delivery not sent", attempt.failure.message).pipe(
        Effect.annotateLogs({ delivery: claimed.id }),
      );
      yield* Effect.flatMap(DeliveryStore, (store) => store.defer(claimed.id, now + 60_000)).pipe(
        Effect.ignore,
      );
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
    const store = yield* DeliveryStore;
    const now = yield* Clock.currentTimeMillis;
    const claimed = yield* store.claimDue({
      now,
      limit: options.maxInFlight,
      perEndpoint: options.maxInFlightPerEndpoint,
      leaseMs: leaseMs(options),
      busy: new Map(),
    });
    const bodyOf = makeBodies();
    const outcomes = yield* Effect.forEach(claimed, (row) => attemptDelivery(row, options, bodyOf), {
      concurrency: "unbounded",
    });
    const recorded = outcomes.filter((o): o is RecordedOutcome => o !== undefined);
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
      const wake = yield* Queue.unbounded<void>();
      const results = yield* Queue.unbounded<RecordedOutcome>();
      // Deliveries claimed and not yet finished, per endpoint, in this process. Claims run ahead of sends
      // (up to CLAIM_AHEAD times the per-endpoint bound) into the endpoint's queue, which at most
      // maxInFlightPerEndpoint sender loops empty, so a freed slot starts its next send without waiting
      // for a round trip to Postgres. (With a fiber per delivery parked on a semaphore instead, the
      // burst of bench:webhooks was 9–20 % slower.)
      const busy = new Map<string, number>();
      const queued = new Map<string, Array<{ row: ClaimedDelivery; bodyOf: Bodies }>>();
      const senders = new Map<string, number>();
      let inFlight = 0;
      const fibers = yield* FiberSet.make();

      const adjust = (endpointId: string, by: number) =>
        Effect.sync(() => {
          const count = (busy.get(endpointId) ?? 0) + by;
          if (count > 0) busy.set(endpointId, count);
          else busy.delete(endpointId);
          inFlight += by;
        });

      // A finished send asks for a claim only when one is worth its round trip: its endpoint filled its
      // share at the last claim (more may be due) and is down to half of it, or the process was at its
      // overall limit. Waking on every send kept claims running back to back, a statement per few
      // deliveries; new deliveries and retries wake the loop by notification and by the poll anyway.
      const claimAhead = CLAIM_AHEAD * options.maxInFlightPerEndpoint;
      const refillAt = claimAhead / 2;
      let mayHaveMore = new Set<string>();
      const finished = (endpointId: string) => {
        const saturated = inFlight >= options.maxInFlight;
        return adjust(endpointId, -1).pipe(
          Effect.andThen(
            saturated || (mayHaveMore.has(endpointId) && (busy.get(endpointId) ?? 0) <= refillAt)
              ? Queue.offer(wake, undefined)
              : Effect.void,
          ),
        );
      };

      // One sender loop of an endpoint: sends its queued deliveries one at a time until none is left. The
      // endpoint's slot is free once it has answered; recording is batched behind it (the lease, longer
      // than every send queued before it, keeps it from being claimed again).
      const sendQueued = (
        endpointId: string,
      ): Effect.Effect<void, never, AttemptSender | SecretBox | DeliveryStore> =>
        Effect.suspend(() => {
          const next = queued.get(endpointId)?.shift();
          if (next === undefined) {
            const left = (senders.get(endpointId) ?? 1) - 1;
            if (left > 0) senders.set(endpointId, left);
            else {
              senders.delete(endpointId);
              queued.delete(endpointId);
            }
            return Effect.void;
          }
          return attemptDelivery(next.row, options, next.bodyOf).pipe(
            Effect.flatMap((outcome) => (outcome ? Queue.offer(results, outcome) : Effect.void)),
            // A defect in one send must not stop the loop: the delivery's lease runs out and it is sent again.
            Effect.catchCause((cause) => Effect.logError("webhook send failed", cause)),
            Effect.ensuring(Effect.suspend(() => finished(endpointId))),
            Effect.andThen(sendQueued(endpointId)),
          );
        });

      const notifications = yield* wakeUps(DELIVERIES_CHANNEL);
      yield* Effect.forkScoped(
        Queue.take(notifications).pipe(Effect.andThen(Queue.offer(wake, undefined)), Effect.forever),
      );

      const claimLoop = Effect.gen(function* () {
        const free = options.maxInFlight - inFlight;
        if (free > 0) {
          const busyBefore = new Map(busy);
          const claimed = yield* store.claimDue({
            now: yield* Clock.currentTimeMillis,
            limit: free,
            perEndpoint: claimAhead,
            leaseMs: runningLeaseMs(options),
            busy: busyBefore,
          });
          // One encoding per event of this claim (its endpoints' deliveries are claimed together).
          const bodyOf = makeBodies();
          const counts = new Map<string, number>();
          for (const row of claimed) counts.set(row.endpoint_id, (counts.get(row.endpoint_id) ?? 0) + 1);
          // Full shares, and endpoints that had no room to be asked about, may have more due.
          const next = new Set<string>();
          for (const [endpointId, n] of busyBefore)
            if (n >= claimAhead && mayHaveMore.has(endpointId)) next.add(endpointId);
          for (const [endpointId, n] of counts)
            if (n >= claimAhead - (busyBefore.get(endpointId) ?? 0)) next.add(endpointId);
          mayHaveMore = next;
          for (const row of claimed) {
            yield* adjust(row.endpoint_id, 1);
            const queue = queued.get(row.endpoint_id);
            if (queue) queue.push({ row, bodyOf });
            else queued.set(row.endpoint_id, [{ row, bodyOf }]);
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
