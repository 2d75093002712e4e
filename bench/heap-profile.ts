/**
 * Summarises a V8 sampling heap profile (`.heapprofile`, e.g. from `LATENCY_HEAP_PROFILE=<file> npm run
 * bench:latency`): bytes allocated by function (self) and by file or package, the top N of each.
 *
 *   node bench/heap-profile.ts <file.heapprofile> [top=25]
 */
import { readFileSync } from "node:fs";

interface HeapNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly selfSize: number;
  readonly children: readonly HeapNode[];
}

const [file, topArg] = process.argv.slice(2);
if (file === undefined) {
  console.error("usage: node bench/heap-profile.ts <file.heapprofile> [top]");
  process.exit(2);
}
const top = Number(topArg ?? 25);
const { head } = JSON.parse(readFileSync(file, "utf8")) as { head: HeapNode };

/** node_modules/<package> for dependencies, the repository path for our own files. */
const where = (url: string): string => {
  if (url === "") return "(native)";
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules?.[1]) return modules[1];
  if (url.startsWith("node:")) return url;
  return /\/(service|bench|scripts|test)\/.*$/.exec(url)?.[0].slice(1) ?? url;
};

const byFunction = new Map<string, number>();
const byFile = new Map<string, number>();
let total = 0;
const walk = (node: HeapNode) => {
  const { functionName, url, lineNumber } = node.callFrame;
  const place = where(url);
  const name = `${functionName || "(anonymous)"} ${place}:${lineNumber + 1}`;
  byFunction.set(name, (byFunction.get(name) ?? 0) + node.selfSize);
  byFile.set(place, (byFile.get(place) ?? 0) + node.selfSize);
  total += node.selfSize;
  for (const child of node.children) walk(child);
};
walk(head);

const print = (title: string, map: Map<string, number>) => {
  console.log(`\n${title} (of ${(total / 2 ** 20).toFixed(1)} MB sampled)`);
  for (const [name, bytes] of [...map].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(
      `${(bytes / 2 ** 20).toFixed(1).padStart(8)} MB ${((bytes / total) * 100).toFixed(1).padStart(5)}%  ${name}`,
    );
};
print("allocated by file or package", byFile);
print("allocated by function (self)", byFunction);
