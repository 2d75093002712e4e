/**
 * Summarises a V8 CPU profile (`.cpuprofile`, e.g. from `API_CPU_PROFILE=<dir> npm run bench:api` or
 * `WEBHOOK_BENCH_CPU_PROF=<dir> npm run bench:webhooks`, or any `node --cpu-prof` run): self time by
 * function and by file (or package), the top N of each, in ms and as percentages of the sampled time.
 *
 *   node bench/cpu-profile.ts <file.cpuprofile> [top=25]
 */
import { frameName, printTop, readProfileArgs, where } from "./profile-tables.ts";

interface ProfileNode {
  readonly id: number;
  readonly callFrame: {
    readonly functionName: string;
    readonly url: string;
    readonly lineNumber: number;
  };
}

interface Profile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

const { profile, top } = readProfileArgs<Profile>("bench/cpu-profile.ts", "cpuprofile");
const byId = new Map(profile.nodes.map((node) => [node.id, node]));

const selfByFunction = new Map<string, number>();
const selfByFile = new Map<string, number>();
let total = 0;
profile.samples.forEach((id, i) => {
  const node = byId.get(id);
  const delta = profile.timeDeltas[i] ?? 0;
  if (node === undefined) return;
  total += delta;
  const fn = frameName(node.callFrame);
  const place = where(node.callFrame.url);
  selfByFunction.set(fn, (selfByFunction.get(fn) ?? 0) + delta);
  selfByFile.set(place, (selfByFile.get(place) ?? 0) + delta);
});

const options = { total, top, unit: "ms", per: 1000 };
printTop("self time by file or package", selfByFile, options);
printTop("self time by function", selfByFunction, options);
