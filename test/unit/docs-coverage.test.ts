/**
 * The docs name everything the code does: every error code (docs/errors.md, generated from the
 * catalogue, and every catalogue code used by the service), every event type (docs/webhooks.md), every
 * id prefix of an API object (docs/api-conventions.md), and none the code no longer has.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { ERROR_CODES } from "../../service/error-codes.ts";
import { EVENT_TYPES } from "../../service/events/event-types.ts";
import { ID_PREFIXES } from "../../service/ids.ts";

const read = (path: string) => readFileSync(path, "utf8");
const sources = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? sources(path) : path.endsWith(".ts") ? [path] : [];
  });

/** `| code | status | when |` rows of a Markdown table, cells trimmed. */
const tableRows = (markdown: string) =>
  markdown
    .split("\n")
    .filter((line) => /^\|\s*`[a-z_]+`\s*\|/.test(line))
    .map((line) =>
      line
        .split("|")
        .slice(1, -1)
        .map((cell) => cell.trim()),
    );

describe("the docs cover the code", () => {
  it("docs/errors.md lists exactly the catalogue, with its statuses and meanings (npm run docs)", () => {
    const documented = tableRows(read("docs/errors.md")).map(([code, status, when]) => ({
      code: code?.replaceAll("`", ""),
      status,
      when,
    }));
    const catalogue = Object.entries(ERROR_CODES).map(([code, entry]) => ({
      code,
      status: typeof entry.status === "number" ? String(entry.status) : entry.status.join(", "),
      when: entry.when,
    }));
    expect(documented).toEqual(catalogue);
  });

  it("every catalogue code is answered somewhere in the service", () => {
    const text = sources("service")
      .filter((path) => !path.endsWith("error-codes.ts"))
      .map(read)
      .join("\n");
    const unused = Object.keys(ERROR_CODES).filter((code) => !text.includes(`"${code}"`));
    expect(unused).toEqual([]);
  });

  it("docs/webhooks.md describes every event type the service emits", () => {
    const doc = read("docs/webhooks.md");
    expect(EVENT_TYPES.filter((type) => !doc.includes(`\`${type}\``))).toEqual([]);
  });

  it("docs/api-conventions.md has one row for every id prefix of an API object, and no other", () => {
    // Ids no API object shows: request ids (a header), console sessions (a cookie stands for them).
    const internal = new Set(["request", "consoleSession"]);
    const prefixes = Object.entries(ID_PREFIXES)
      .filter(([kind]) => !internal.has(kind))
      .map(([, prefix]) => `${prefix}_`);
    const rows = read("docs/api-conventions.md")
      .split("\n")
      .flatMap((line) => {
        const prefix = /^\|\s*`([a-z]+_)`\s*\|/.exec(line)?.[1];
        return prefix === undefined ? [] : [prefix];
      });
    expect(rows.toSorted()).toEqual(prefixes.toSorted());
  });
});
