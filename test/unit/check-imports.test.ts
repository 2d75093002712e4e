import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { checkImports } from "../../scripts/check-imports.ts";

let root = "";
const tree = (files: Record<string, string>) => {
  root = mkdtempSync(join(tmpdir(), "imports-"));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), text);
  }
  mkdirSync(join(root, "src"), { recursive: true });
  return root;
};
afterEach(() => rmSync(root, { recursive: true, force: true }));

describe("the import check", () => {
  it("passes the project itself", () => {
    expect(checkImports(".")).toEqual([]);
  });

  it("accepts arrows down the layers", () => {
    expect(
      checkImports(
        tree({
          "service/http/app.ts": 'import { x } from "../charges/charges.ts";',
          "service/charges/charges.ts": 'import { y } from "../db/rows.ts";\nexport const x = 1;',
          "service/db/rows.ts": "export const y = 1;",
        }),
      ),
    ).toEqual([]);
  });

  it("refuses an arrow back up, a worker reaching http, and a cycle within a level", () => {
    const problems = checkImports(
      tree({
        "service/db/rows.ts": 'import { x } from "../charges/charges.ts";',
        "service/workers/runtime.ts": 'import { e } from "../http/error-response.ts";',
        "service/facts/a.ts": 'import { b } from "../subscriptions/b.ts";',
        "service/subscriptions/b.ts": 'import { a } from "../facts/a.ts";',
        "service/charges/charges.ts": "export const x = 1;",
        "service/http/error-response.ts": "export const e = 1;",
      }),
    );
    expect(problems.some((p) => p.includes("service/db/rows.ts (db) imports"))).toBe(true);
    expect(problems.some((p) => p.includes("service/workers/runtime.ts (workers) imports"))).toBe(true);
    expect(problems.some((p) => p.startsWith("a cycle between folders"))).toBe(true);
  });

  it("refuses the indexer importing the service and the service importing tests", () => {
    const problems = checkImports(
      tree({
        "src/indexing/escrow.ts": 'import { x } from "../../service/db/rows.ts";',
        "service/db/rows.ts": 'import { t } from "../../test/e2e/helpers.ts";',
      }),
    );
    expect(problems).toHaveLength(2);
  });
});
