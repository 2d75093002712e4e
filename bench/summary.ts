/**
 * Prints every bench/results/*.json summary as one table: figure, baseline from the same run, target.
 * `npm run bench` runs each benchmark, then this.
 */
import { readdirSync, readFileSync } from "node:fs";
import { AGAINST_TEN_THOUSAND, type SummaryRow, sameBoot } from "./report.ts";

interface Results {
  readonly measured_at: string;
  readonly command: string;
  readonly machine?: { readonly cores: number; readonly boot_id?: string | null };
  readonly summary?: ReadonlyArray<SummaryRow>;
}

const format = (value: number): string =>
  value.toLocaleString("en-US", {
    maximumFractionDigits: Math.abs(value) < 10 ? 2 : Math.abs(value) < 100 ? 1 : 0,
  });

/**
 * A billing run at another size than 10,000 is compared with the newest 10,000 figure (billing.json), as
 * its target says, when both were measured since the same boot; otherwise with none (the machines of
 * these sessions differ by 2× and more).
 */
const TEN_THOUSAND = (() => {
  try {
    const ten = JSON.parse(readFileSync("bench/results/billing.json", "utf8")) as Results & {
      readonly cost_per_subscription?: { readonly cpu_ms?: number };
    };
    const cpu = ten.cost_per_subscription?.cpu_ms;
    return cpu === undefined ? undefined : { cpu, at: ten.measured_at.slice(0, 16), results: ten };
  } catch {
    return undefined;
  }
})();
const againstNewest = (results: Results, row: SummaryRow): SummaryRow => {
  if (row.target !== AGAINST_TEN_THOUSAND) return row;
  if (TEN_THOUSAND === undefined || !sameBoot(results, TEN_THOUSAND.results))
    return { ...row, baseline: null, baseline_what: null, meets_target: null };
  return {
    ...row,
    baseline: TEN_THOUSAND.cpu,
    baseline_what: `10,000 due, ${TEN_THOUSAND.at}`,
    meets_target: row.figure <= TEN_THOUSAND.cpu * 1.2,
  };
};

const rows: string[][] = [["what", "figure", "baseline", "target", "meets", "measured"]];
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
  for (const row of results.summary.map((row) => againstNewest(results, row))) {
    if (row.meets_target === false) failing += 1;
    rows.push([
      row.what,
      `${format(row.figure)} ${row.unit}`,
      row.baseline === null ? "—" : `${format(row.baseline)} ${row.unit} (${row.baseline_what ?? ""})`,
      row.target ?? "—",
      row.meets_target === null ? "—" : row.meets_target ? "yes" : "NO",
      `${results.measured_at.slice(0, 16).replace("T", " ")}, ${results.machine?.cores ?? "?"} cores`,
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
