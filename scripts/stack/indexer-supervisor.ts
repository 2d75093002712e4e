/**
 * The local stack's indexer supervisor: what a process supervisor does in production (see docs/operations.md,
 * "The indexer watchdog"). Every second it asks the service `GET /indexer/live`, which answers 503 while the
 * service's watchdog finds a chain stalled (the chain moves on, its indexed head does not); then it
 * restarts the indexer. A restart is followed by a backfill, during which the watchdog does not count,
 * so a restarted indexer is given its time.
 */
import { sleep } from "./wait.ts";

export interface IndexerSupervisor {
  /** Stops watching; waits for a restart under way, so that no indexer outlives the stack. */
  stop(): Promise<void>;
}

export const superviseIndexer = (options: {
  readonly serviceUrl: string;
  readonly ponderPid: () => number;
  readonly restart: () => Promise<void>;
  readonly onLine: (line: string) => void;
  readonly intervalMs?: number;
}): IndexerSupervisor => {
  let stopped = false;
  const stalledChains = async (): Promise<number[]> => {
    const response = await fetch(`${options.serviceUrl}/indexer/live`, {
      signal: AbortSignal.timeout(3000),
    }).catch(() => undefined);
    if (response?.status !== 503) {
      await response?.body?.cancel();
      return [];
    }
    const body = (await response.json().catch(() => ({}))) as { stalled?: unknown };
    return Array.isArray(body.stalled)
      ? body.stalled.filter((id): id is number => typeof id === "number")
      : [];
  };
  const loop = (async () => {
    while (!stopped) {
      await sleep(options.intervalMs ?? 1000);
      if (stopped) break;
      const stalled = await stalledChains();
      if (stalled.length === 0) continue;
      const started = performance.now();
      options.onLine(
        `Indexer stalled on ${stalled.map((id) => `chain ${id}`).join(", ")} (the chain moves on, its indexed head does not); restarting it`,
      );
      try {
        // A stalled indexer is broken: a graceful stop waited out its 15 s limit (measured). Ponder
        // resumes from its last checkpoint after a kill, as after any crash.
        process.kill(options.ponderPid(), "SIGKILL");
      } catch {}
      try {
        await options.restart();
        options.onLine(`Indexer restarted and caught up in ${Math.round(performance.now() - started)} ms`);
      } catch (error) {
        options.onLine(`Indexer restart failed: ${error instanceof Error ? error.message : String(error)}`);
      }
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
};
