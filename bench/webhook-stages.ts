/**
 * Stage timing for `WEBHOOK_BENCH_STAGES=1` (bench/webhooks.ts): where a paced delivery's time goes,
 * measured from outside the service's hot path. The bench's DeliveryStore and AttemptSender are the
 * service's own, wrapped by these layers to note the clock around each claim, send and record; the
 * inserter notes each batch's commit and the receivers each arrival. A delivery is keyed by its
 * receiver URL and event id. Clocks: `performance.timeOrigin + performance.now()` in every process.
 */
import { monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks";
import { Effect, Layer } from "effect";
import { type ClaimedDelivery, DeliveryStore } from "../service/webhooks/delivery-store.ts";
import { type Attempt, AttemptSender } from "../service/webhooks/sender.ts";
import { percentile, percentiles, tenths, wall } from "./report.ts";

interface Marks {
  claimStart?: number;
  claimEnd?: number;
  claimRows?: number;
  sendStart?: number;
  sendEnd?: number;
  recordStart?: number;
  recordEnd?: number;
  recordRows?: number;
}

export const makeStageRecorder = () => {
  const marks = new Map<string, Marks>();
  const keyOfDelivery = new Map<string, string>();
  const mark = (key: string) => {
    const hit = marks.get(key);
    if (hit) return hit;
    const created: Marks = {};
    marks.set(key, created);
    return created;
  };
  const keyOfClaim = (row: ClaimedDelivery) => `${row.url}|${row.event_id}`;
  const eventIdOf = (bytes: string | Uint8Array) => {
    const body = typeof bytes === "string" ? bytes : Buffer.from(bytes).toString("utf8");
    const start = body.indexOf('"id":"') + 6;
    return body.slice(start, body.indexOf('"', start));
  };
  const gcPauses: number[] = [];
  const gcObserver = new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) gcPauses.push(entry.duration);
  });
  const loopDelay = monitorEventLoopDelay({ resolution: 5 });

  const storeLayer = Layer.effect(
    DeliveryStore,
    Effect.map(Effect.service(DeliveryStore), (inner) =>
      DeliveryStore.of({
        ...inner,
        claimDue: (input) => {
          const started = wall();
          return Effect.tap(inner.claimDue(input), (rows) =>
            Effect.sync(() => {
              const ended = wall();
              for (const row of rows) {
                const key = keyOfClaim(row);
                keyOfDelivery.set(row.id, key);
                Object.assign(mark(key), { claimStart: started, claimEnd: ended, claimRows: rows.length });
              }
            }),
          );
        },
        recordOutcomes: (outcomes, random) => {
          const started = wall();
          return Effect.tap(inner.recordOutcomes(outcomes, random), () =>
            Effect.sync(() => {
              const ended = wall();
              for (const o of outcomes) {
                const key = keyOfDelivery.get(o.deliveryId);
                if (key)
                  Object.assign(mark(key), {
                    recordStart: started,
                    recordEnd: ended,
                    recordRows: outcomes.length,
                  });
              }
            }),
          );
        },
      }),
    ),
  ).pipe(Layer.provide(DeliveryStore.layer));

  const wrapSender = <E, R>(inner: Layer.Layer<AttemptSender, E, R>) =>
    Layer.effect(
      AttemptSender,
      Effect.map(Effect.service(AttemptSender), (inner) =>
        AttemptSender.of({
          send: (attempt: Attempt) => {
            const key = `${attempt.url}|${eventIdOf(attempt.body)}`;
            mark(key).sendStart = wall();
            return inner.send(attempt).then((outcome) => {
              mark(key).sendEnd = wall();
              return outcome;
            });
          },
        }),
      ),
    ).pipe(Layer.provide(inner));

  return {
    storeLayer,
    wrapSender,
    start: () => {
      marks.clear();
      keyOfDelivery.clear();
      gcPauses.length = 0;
      gcObserver.observe({ entryTypes: ["gc"] });
      loopDelay.reset();
      loopDelay.enable();
    },
    /** Per-stage percentiles over the deliveries given (receipt and insert times from the other processes). */
    report: (
      receipts: ReadonlyArray<{ readonly key: string; readonly sentAt: number; readonly receivedAt: number }>,
      commits: ReadonlyMap<string, number>,
    ) => {
      gcObserver.disconnect();
      loopDelay.disable();
      const stages = {
        "insert (sent_at → commit acknowledged)": [] as number[],
        "wake-up (commit → claim statement starts)": [] as number[],
        "claim statement": [] as number[],
        "queued (claim returned → send starts)": [] as number[],
        "send (send starts → receipt)": [] as number[],
        "total (sent_at → receipt)": [] as number[],
        "record (receipt → record statement done)": [] as number[],
        "record statement": [] as number[],
      };
      const rows: Array<{ total: number; parts: number[] }> = [];
      for (const receipt of receipts) {
        const m = marks.get(receipt.key);
        const eventId = receipt.key.slice(receipt.key.lastIndexOf("|") + 1);
        const commit = commits.get(eventId);
        if (!m || commit === undefined || m.claimStart === undefined || m.claimEnd === undefined) continue;
        if (m.sendStart === undefined) continue;
        const parts = [
          commit - receipt.sentAt,
          m.claimStart - commit,
          m.claimEnd - m.claimStart,
          m.sendStart - m.claimEnd,
          receipt.receivedAt - m.sendStart,
        ];
        const total = receipt.receivedAt - receipt.sentAt;
        const values = Object.values(stages);
        parts.forEach((value, i) => {
          values[i]?.push(value);
        });
        stages["total (sent_at → receipt)"].push(total);
        if (m.recordEnd !== undefined && m.recordStart !== undefined) {
          stages["record (receipt → record statement done)"].push(m.recordEnd - receipt.receivedAt);
          stages["record statement"].push(m.recordEnd - m.recordStart);
        }
        rows.push({ total, parts });
      }
      const table = Object.entries(stages).map(([stage, values]) => ({
        stage,
        n: values.length,
        ...percentiles(values),
      }));
      // The slowest 1 %: the mean of each stage among them.
      const slowest = [...rows].sort((a, b) => b.total - a.total).slice(0, Math.max(1, rows.length / 100));
      const names = Object.keys(stages).slice(0, 5);
      const slowestShare = Object.fromEntries(
        names.map((name, i) => [
          name,
          tenths(slowest.reduce((sum, row) => sum + (row.parts[i] ?? 0), 0) / slowest.length),
        ]),
      );
      const claimSizes = [...marks.values()].map((m) => m.claimRows ?? 0).filter((n) => n > 0);
      const recordSizes = [...marks.values()].map((m) => m.recordRows ?? 0).filter((n) => n > 0);
      return {
        table,
        slowest_1pct_mean_ms: slowestShare,
        mean_rows_per_claim_seen_by_a_delivery: tenths(
          claimSizes.reduce((a, b) => a + b, 0) / claimSizes.length,
        ),
        mean_rows_per_record_seen_by_a_delivery: tenths(
          recordSizes.reduce((a, b) => a + b, 0) / recordSizes.length,
        ),
        gc: {
          pauses: gcPauses.length,
          total_ms: tenths(gcPauses.reduce((a, b) => a + b, 0)),
          max_ms: tenths(percentile(gcPauses, 100)),
        },
        event_loop_delay_ms: {
          p50: tenths(loopDelay.percentile(50) / 1e6),
          p99: tenths(loopDelay.percentile(99) / 1e6),
          max: tenths(loopDelay.max / 1e6),
        },
      };
    },
  };
};
