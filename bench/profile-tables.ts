/**
 * What bench/cpu-profile.ts and bench/heap-profile.ts share: where a V8 profile's frame is (a package,
 * a Node module or one of our files), the command line, and the printing of a table's top rows.
 */
import { readFileSync } from "node:fs";

/** node_modules/<package> for dependencies, the repository path for our own files. */
export const where = (url: string): string => {
  if (url === "") return "(native)";
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules?.[1]) return modules[1];
  if (url.startsWith("node:")) return url;
  const ours = /\/(service|bench|scripts|test)\/.*$/.exec(url);
  return ours ? ours[0].slice(1) : url;
};

/** A frame's name with its place: `function file:line`. */
export const frameName = (frame: {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}): string =>
  `${frame.functionName || "(anonymous)"} ${where(frame.url)}${frame.url ? `:${frame.lineNumber + 1}` : ""}`;

/** The profile file named on the command line, parsed, and how many rows each table shows. */
export const readProfileArgs = <P>(script: string, extension: string): { profile: P; top: number } => {
  const [file, topArg] = process.argv.slice(2);
  if (file === undefined) {
    console.error(`usage: node ${script} <file.${extension}> [top]`);
    process.exit(2);
  }
  return { profile: JSON.parse(readFileSync(file, "utf8")) as P, top: Number(topArg ?? 25) };
};

/** The table's `top` largest rows, each with its share of `total`, in `unit` (the value divided by `per`). */
export const printTop = (
  title: string,
  table: ReadonlyMap<string, number>,
  options: { readonly total: number; readonly top: number; readonly unit: string; readonly per: number },
): void => {
  const { total, top, unit, per } = options;
  console.log(`\n${title} (of ${(total / per).toFixed(unit === "ms" ? 0 : 1)} ${unit} sampled)`);
  for (const [name, value] of [...table].sort((a, b) => b[1] - a[1]).slice(0, top))
    console.log(
      `${(value / per).toFixed(unit === "ms" ? 0 : 1).padStart(8)} ${unit} ${((100 * value) / total).toFixed(1).padStart(5)}%  ${name}`,
    );
};
