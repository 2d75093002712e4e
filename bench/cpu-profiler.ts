/**
 * A V8 CPU profile of this process over part of a bench (the inspector's `Profiler`), for
 * `node bench/cpu-profile.ts`: started where the part begins, written where it ends.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { dirname } from "node:path";

export interface CpuProfiler {
  /** Stops the profile and writes it to `file` (its directory made if missing). */
  readonly stop: (file: string) => Promise<void>;
}

export const startCpuProfile = async (): Promise<CpuProfiler> => {
  const session = new Session();
  session.connect();
  await session.post("Profiler.enable");
  await session.post("Profiler.start");
  return {
    stop: async (file) => {
      const { profile } = await session.post("Profiler.stop");
      session.disconnect();
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, JSON.stringify(profile));
    },
  };
};
