/**
 * The import check of `npm test`: dependencies between the service's folders point one way, from the
 * HTTP layer through the domain to persistence and infrastructure. Each folder has a level; a file may
 * import from its own folder and from folders of a lower or equal level, never from a higher one, and
 * the folders import each other without a cycle. The indexer (`src/`) never imports the service, the
 * service never imports tests or scripts, and nothing but the composition root imports `http/`.
 * Prints every violation and exits 1 on any.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";

/** Lowest first. Same-level imports are allowed as long as they form no cycle. */
export const LEVELS: Readonly<Record<string, number>> = {
  // Infrastructure: no domain knowledge.
  "(root)": 0,
  db: 0,
  money: 0,
  workers: 0,
  metrics: 0,
  limits: 1,
  merchants: 1,
  auth: 2,
  idempotency: 2,
  config: 3,
  chains: 3,
  events: 4,
  mandates: 5,
  webhooks: 5,
  charges: 6,
  payments: 6,
  balances: 6,
  facts: 7,
  subscriptions: 7,
  reconciliation: 7,
  testing: 7,
  portal: 7,
  x402: 8,
  maintenance: 8,
  reports: 8,
  operations: 8,
  http: 9,
  // The composition root: layers.ts, main.ts, cli.ts.
  "(composition)": 10,
};
const COMPOSITION = new Set(["layers.ts", "main.ts", "cli.ts"]);

const walk = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? walk(path) : /\.tsx?$/.test(name) ? [path] : [];
  });

const importsOf = (file: string): string[] =>
  [
    ...readFileSync(file, "utf8").matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["'](\.[^"']+)["']/g),
  ].map((m) => normalize(join(dirname(file), m[1] as string)));

/** The folder of a file under service/ (`(root)` and `(composition)` for top-level files). */
export const folderOf = (path: string): string => {
  const parts = relative("service", path).split("/");
  if (parts.length === 1) return COMPOSITION.has(parts[0] as string) ? "(composition)" : "(root)";
  return parts[0] as string;
};

export const checkImports = (root = "."): string[] => {
  const problems: string[] = [];
  const edges = new Map<string, Set<string>>();
  for (const file of walk(join(root, "service"))) {
    const from = folderOf(relative(root, file));
    const level = LEVELS[from];
    if (level === undefined)
      problems.push(`${relative(root, file)}: folder ${from} has no level in scripts/check-imports.ts`);
    for (const target of importsOf(file)) {
      const rel = relative(root, target);
      if (rel.startsWith("test/") || rel.startsWith("scripts/") || rel.startsWith("bench/"))
        problems.push(
          `${relative(root, file)} imports ${rel}: the service never depends on tests or scripts`,
        );
      if (!rel.startsWith("service/")) continue;
      const to = folderOf(rel);
      if (to === from) continue;
      const targetLevel = LEVELS[to];
      if (level !== undefined && targetLevel !== undefined && targetLevel > level)
        problems.push(
          `${relative(root, file)} (${from}) imports ${rel} (${to}): an arrow back up the layers`,
        );
      if (!edges.has(from)) edges.set(from, new Set());
      edges.get(from)?.add(to);
    }
  }
  for (const file of walk(join(root, "src")))
    for (const target of importsOf(file))
      if (relative(root, target).startsWith("service/"))
        problems.push(
          `${relative(root, file)} imports ${relative(root, target)}: the indexer never depends on the service`,
        );
  // Folder cycles (within a level, where the level rule alone allows both directions).
  const visiting = new Set<string>();
  const done = new Set<string>();
  const visit = (folder: string, path: string[]) => {
    if (done.has(folder)) return;
    if (visiting.has(folder)) {
      problems.push(`a cycle between folders: ${[...path.slice(path.indexOf(folder)), folder].join(" → ")}`);
      return;
    }
    visiting.add(folder);
    for (const next of edges.get(folder) ?? []) visit(next, [...path, folder]);
    visiting.delete(folder);
    done.add(folder);
  };
  for (const folder of edges.keys()) visit(folder, []);
  return problems;
};

if (import.meta.main) {
  const problems = checkImports();
  for (const problem of problems) console.error(problem);
  if (problems.length > 0) process.exit(1);
  console.log("imports: every arrow points down the layers, no cycle between folders");
}
