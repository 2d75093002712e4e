/**
 * Sums a V8 CPU profile's self time by file (or package) and by function:
 * `node bench/webhook-cpu-profile.ts <file.cpuprofile>` (e.g. the one WEBHOOK_BENCH_CPU_PROF writes).
 */
import { readFileSync } from "node:fs";

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
}
interface Profile {
  readonly nodes: ReadonlyArray<ProfileNode>;
  readonly samples: ReadonlyArray<number>;
  readonly timeDeltas: ReadonlyArray<number>;
}

const profile = JSON.parse(readFileSync(process.argv[2] ?? "", "utf8")) as Profile;
const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
const byFunction = new Map<string, number>();
const byFile = new Map<string, number>();
const add = (map: Map<string, number>, key: string, micros: number) =>
  map.set(key, (map.get(key) ?? 0) + micros);
let total = 0;
profile.samples.forEach((id, index) => {
  const micros = profile.timeDeltas[index] ?? 0;
  total += micros;
  const frame = nodes.get(id)?.callFrame;
  if (!frame) return;
  const file = (frame.url || "(native)")
    .replace(/.*node_modules\//, "nm/")
    .replace(`file://${process.cwd()}/`, "");
  const parts = file.split("/");
  const packageOrFile = file.startsWith("nm/")
    ? parts.slice(0, parts[1]?.startsWith("@") ? 3 : 2).join("/")
    : file;
  add(byFile, packageOrFile, micros);
  add(byFunction, `${frame.functionName || "(anonymous)"} ${file}:${frame.lineNumber + 1}`, micros);
});
const show = (title: string, map: Map<string, number>, count: number) => {
  console.log(`--- ${title}`);
  for (const [key, micros] of [...map].sort((a, b) => b[1] - a[1]).slice(0, count))
    console.log(
      `${(micros / 1000).toFixed(0).padStart(8)} ms ${((100 * micros) / total).toFixed(1).padStart(5)} %  ${key}`,
    );
};
console.log(`total ${(total / 1000).toFixed(0)} ms`);
show("by file or package", byFile, 25);
show("by function", byFunction, 35);
