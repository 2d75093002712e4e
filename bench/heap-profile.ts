/**
 * Summarises a V8 sampling heap profile (`.heapprofile`, e.g. from `LATENCY_HEAP_PROFILE=<file> npm run
 * bench:latency`): bytes allocated by function (self) and by file or package, the top N of each.
 *
 *   node bench/heap-profile.ts <file.heapprofile> [top=25]
 */
import { frameName, printTop, readProfileArgs, where } from "./profile-tables.ts";

interface HeapNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly selfSize: number;
  readonly children: readonly HeapNode[];
}

const { profile, top } = readProfileArgs<{ head: HeapNode }>("bench/heap-profile.ts", "heapprofile");

const byFunction = new Map<string, number>();
const byFile = new Map<string, number>();
let total = 0;
const walk = (node: HeapNode) => {
  const fn = frameName(node.callFrame);
  const place = where(node.callFrame.url);
  byFunction.set(fn, (byFunction.get(fn) ?? 0) + node.selfSize);
  byFile.set(place, (byFile.get(place) ?? 0) + node.selfSize);
  total += node.selfSize;
  for (const child of node.children) walk(child);
};
walk(profile.head);

const options = { total, top, unit: "MB", per: 2 ** 20 };
printTop("allocated by file or package", byFile, options);
printTop("allocated by function (self)", byFunction, options);
