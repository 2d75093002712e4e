/**
 * Prints every bench/results/*.json summary as one table: figure, the baseline from the same run or the
 * physical limit, their ratio, the target on the ratio and whether it is met, and when (and at which
 * commit, where the file says) it was measured. `npm run bench` runs each benchmark, then this; alone it
 * only reads the files. Each row is printed as its run wrote it: a billing run at another size than
 * 10,000 carries the 10,000 run it made just before (bench/billing.ts).
 */
import { readdirSync, readFileSync } from "node:fs";
import type { SummaryRow } from "./report.ts";

interface Results {
  readonly measured_at: string;
  readonly commit?: string | null;
  readonly command: string;
  readonly machine?: { readonly cores: number; readonly boot_id?: string | null };
  readonly summary?: ReadonlyArray<Partial<Pick<SummaryRow, "ratio">> & Omit<SummaryRow, "ratio">>;
}

const format = (value: number): string =>
  value.toLocaleString("en-US", {
    maximumFractionDigits: Math.abs(value) < 10 ? 2 : Math.abs(value) < 100 ? 1 : 0,
  });

const rows: string[][] = [["what", "figure", "baseline or limit", "ratio", "target", "met", "measured"]];
/** What each file's baselines are, once per file and kind. */
const notes = new Set<string>();
let missing = 0;
let failing = 0;
for (const file of readdirSync("bench/results")
  .filter((name) => name.endsWith(".json"))
  .sort()) {
  const results = JSON.parse(readFileSync(`bench/results/${file}`, "utf8")) as Results;
  if (results.summary === undefined) {
    missing += 1;
    continue;
  }
  const measured = `${results.measured_at.slice(0, 16).replace("T", " ")}${results.commit ? ` at ${results.commit}` : ""}, ${results.machine?.cores ?? "?"} cores`;
  for (const row of results.summary) {
    if (row.meets_target === false) failing += 1;
    if (row.baseline !== null && row.baseline_what) notes.add(`${file}: ${row.baseline_what}`);
    rows.push([
      row.what,
      `${format(row.figure)} ${row.unit}`,
      row.baseline === null ? "—" : `${format(row.baseline)} ${row.unit}`,
      row.ratio === null || row.ratio === undefined
        ? "—"
        : row.ratio.toLocaleString("en-US", { maximumFractionDigits: 3 }),
      row.target ?? "—",
      row.meets_target === null ? "—" : row.meets_target ? "yes" : "NO",
      measured,
    ]);
  }
}
const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => row[column]?.length ?? 0))) ?? [];
for (const [index, row] of rows.entries()) {
  console.log(
    row
      .map((cell, column) => cell.padEnd(widths[column] ?? 0))
      .join("  ")
      .trimEnd(),
  );
  if (index === 0) console.log(widths.map((width) => "-".repeat(width)).join("  "));
}
console.log(
  `${rows.length - 1} figures, ${failing} below target${missing > 0 ? `, ${missing} results files without a summary` : ""}`,
);
console.log("\nbaselines and limits:");
for (const note of notes) console.log(`- ${note}`);
