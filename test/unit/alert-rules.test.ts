/**
 * The Prometheus alert rules shipped for operators (ops/prometheus/): every metric they name is one the
 * service exports, and promtool accepts them and their unit tests where it is installed (Debian's
 * `prometheus` package has it).
 */
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";

const RULES = "ops/prometheus/billing-alerts.yml";
const hasPromtool = spawnSync("promtool", ["--version"]).status === 0;

const sources = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sources(join(dir, entry.name))
      : entry.name.endsWith(".ts")
        ? [readFileSync(join(dir, entry.name), "utf8")]
        : [],
  );

describe("alert rules", () => {
  it("name only metrics the service exports", () => {
    const exported = new Set(
      sources("service").flatMap((text) => [...text.matchAll(/"(billing_[a-z_]+)"/g)].map((m) => m[1])),
    );
    const named = new Set([...readFileSync(RULES, "utf8").matchAll(/\b(billing_[a-z_]+)/g)].map((m) => m[1]));
    expect(named.size).toBeGreaterThan(10);
    for (const metric of named) expect(exported, metric).toContain(metric);
  });

  it.runIf(hasPromtool)("pass promtool check rules and promtool test rules", () => {
    const check = spawnSync("promtool", ["check", "rules", RULES], { encoding: "utf8" });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    const test = spawnSync("promtool", ["test", "rules", "billing-alerts.test.yml"], {
      cwd: "ops/prometheus",
      encoding: "utf8",
    });
    expect(test.status, test.stdout + test.stderr).toBe(0);
  });
});
