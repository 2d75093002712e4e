/**
 * Summarises a V8 CPU profile (`.cpuprofile`, e.g. from `API_CPU_PROFILE=<dir> npm run bench:api` or
 * `WEBHOOK_BENCH_CPU_PROF=<dir> npm run bench:webhooks`, or any `node --cpu-prof` run): self time by
 * function and by file (or package), the top N of each, in ms and as percentages of the sampled time.
 *
 *   node bench/cpu-profile.ts <file.cpuprofile> [top=25]
 */
import { readFileSync } from "node:fs";

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

const [file, topArg] = process.argv.slice(2);
if (file === undefined) {
  console.error("usage: node bench/cpu-profile.ts <file.cpuprofile> [top]");
  process.exit(2);
}
const top = Number(topArg ?? 25);
const profile = JSON.parse(readFileSync(file, "utf8")) as Profile;
const byId = new Map(profile.nodes.map((node) => [node.id, node]));

/** node_modules/<package> for dependencies, the repository path for our own files. */
const where = (url: string): string => {
  if (url === "") return "(native)";
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules?.[1]) return modules[1];
  if (url.startsWith("node:")) return url;
  const ours = /\/(service|bench|scripts)\/.*$/.exec(url);
  return ours ? ours[0].slice(1) : url;
};

const selfByFunction = new Map<string, number>();
const selfByFile = new Map<string, number>();
let total = 0;
profile.samples.forEach((id, i) => {
  const node = byId.get(id);
  const delta = profile.timeDeltas[i] ?? 0;
  if (node === undefined) return;
  total += delta;
  const { functionName, url, lineNumber } = node.callFrame;
  const place = where(url);
  const fn = `${functionName || "(anonymous)"} ${place}${url ? `:${lineNumber + 1}` : ""}`;
  selfByFunction.set(fn, (selfByFunction.get(fn) ?? 0) + delta);
  selfByFile.set(place, (selfByFile.get(place) ?? 0) + delta);
});

const print = (title: string, table: Map<string, number>) => {
  console.log(`\n${title} (of ${Math.round(total / 1000)} ms sampled)`);
  for (const [name, micros] of [...table].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(
      `${(micros / 1000).toFixed(0).padStart(8)} ms ${((100 * micros) / total).toFixed(1).padStart(5)}%  ${name}`,
    );
};
print("self time by file or package", selfByFile);
print("self time by function", selfByFunction);
