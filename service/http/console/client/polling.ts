/** Reads now and again `intervalMs` after each answer (never two reads at once), while mounted. */
import { useEffect, useRef } from "preact/hooks";

export const usePolling = (read: () => Promise<void>, intervalMs: number, deps: readonly unknown[] = []) => {
  const latest = useRef(read);
  latest.current = read;
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const tick = async () => {
      await latest.current().catch(() => undefined);
      if (!stopped) timer = setTimeout(tick, intervalMs);
    };
    void tick();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [intervalMs, ...deps]);
};
