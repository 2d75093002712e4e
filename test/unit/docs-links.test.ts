/**
 * The docs stay true to the tree and to the code: every relative link of README.md, ARCHITECTURE.md and
 * docs/*.md resolves (to a file that exists and, with a `#anchor`, to a heading of that file by GitHub's
 * slugs, or an `<a id>` in it), and docs/configuration.md has exactly one row for each environment
 * variable the code reads (the service's and `npm start`'s rules, and the scripts' own reads) and none
 * for a variable it no longer reads.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import GithubSlugger from "github-slugger";
import type { Nodes, Root } from "mdast";
import { fromMarkdown } from "mdast-util-from-markdown";
import { gfmFromMarkdown } from "mdast-util-gfm";
import { toString as textOf } from "mdast-util-to-string";
import { gfm } from "micromark-extension-gfm";
import { describe, expect, it } from "vitest";
import { env } from "../../service/config/env-rules.ts";

const read = (path: string) => readFileSync(path, "utf8");
const parse = (path: string): Root =>
  fromMarkdown(read(path), { extensions: [gfm()], mdastExtensions: [gfmFromMarkdown()] });

const walk = (node: Nodes, visit: (node: Nodes) => void): void => {
  visit(node);
  if ("children" in node) for (const child of node.children) walk(child, visit);
};

const DOCS = [
  "README.md",
  "ARCHITECTURE.md",
  ...readdirSync("docs")
    .filter((name) => name.endsWith(".md"))
    .map((name) => join("docs", name)),
];

const anchorsByFile = new Map<string, Set<string>>();

/** The anchors GitHub gives a Markdown file: its headings' slugs, and the ids of its `<a id>`/`<a name>`. */
const anchorsOf = (path: string): Set<string> => {
  const known = anchorsByFile.get(path);
  if (known !== undefined) return known;
  const slugger = new GithubSlugger();
  const anchors = new Set<string>();
  walk(parse(path), (node) => {
    if (node.type === "heading") anchors.add(slugger.slug(textOf(node)));
    if (node.type === "html")
      for (const match of node.value.matchAll(/<a\s[^>]*\b(?:id|name)="([^"]+)"/g))
        if (match[1] !== undefined) anchors.add(match[1]);
  });
  anchorsByFile.set(path, anchors);
  return anchors;
};

/** Every link and link definition of the file whose URL has no scheme: a path, an anchor, or both. */
const relativeLinks = (path: string): string[] => {
  const urls: string[] = [];
  walk(parse(path), (node) => {
    if (node.type === "link" || node.type === "definition" || node.type === "image") urls.push(node.url);
  });
  return urls.filter((url) => !/^[a-z][a-z0-9+.-]*:/i.test(url) && !url.startsWith("//"));
};

/** Why a link does not resolve, or undefined when it does. */
const brokenBecause = (from: string, url: string): string | undefined => {
  const [pathPart = "", anchor] = url.split("#", 2);
  const target =
    pathPart === "" ? from : join(dirname(from), decodeURIComponent(pathPart.split("?")[0] ?? ""));
  if (!existsSync(target)) return `${target} does not exist`;
  if (anchor === undefined || anchor === "" || statSync(target).isDirectory() || !target.endsWith(".md"))
    return undefined;
  return anchorsOf(target).has(decodeURIComponent(anchor))
    ? undefined
    : `${target} has no heading #${anchor}`;
};

const sources = (path: string): string[] =>
  statSync(path).isDirectory()
    ? readdirSync(path).flatMap((name) => sources(join(path, name)))
    : path.endsWith(".ts")
      ? [path]
      : [];

/**
 * Every variable the code reads: the rules of the service and `npm start` (service/config/env-rules.ts),
 * and what the scripts, the indexer's config and the service read themselves (`process.env.NAME`, and the
 * variables they name for a key: `key_env`/`password_env`).
 */
const variablesRead = (): Set<string> => {
  const names = new Set<string>(Object.keys(env));
  const code = [...sources("scripts"), ...sources("service"), ...sources("src"), "ponder.config.ts"]
    .map(read)
    .join("\n");
  const patterns = [
    /process\.env\.([A-Z][A-Z0-9_]*)/g,
    /process\.env\[\s*["'`]([A-Z][A-Z0-9_]*)["'`]\s*\]/g,
    /\b(?:key_env|password_env):\s*"([A-Z][A-Z0-9_]*)"/g,
  ];
  for (const pattern of patterns)
    for (const match of code.matchAll(pattern)) if (match[1] !== undefined) names.add(match[1]);
  return names;
};

/** The first cell of each `| \`NAME\` | … |` row of docs/configuration.md. */
const variablesDocumented = (): string[] =>
  read("docs/configuration.md")
    .split("\n")
    .flatMap((line) => {
      const name = /^\|\s*`([A-Z][A-Z0-9_]*)`\s*\|/.exec(line)?.[1];
      return name === undefined ? [] : [name];
    });

describe("the docs' links resolve", () => {
  it.each(DOCS)("%s: every relative link names a file that exists, and a heading of it", (path) => {
    const broken = relativeLinks(path).flatMap((url) => {
      const reason = brokenBecause(path, url);
      return reason === undefined ? [] : [`${url}: ${reason}`];
    });
    expect(broken).toEqual([]);
  });
});

describe("docs/configuration.md documents the environment", () => {
  const inCode = variablesRead();
  const documented = variablesDocumented();

  it("finds the variables in the code (the check is not empty)", () => {
    expect(inCode.size).toBeGreaterThan(30);
    for (const name of ["DATABASE_URL", "POSTGRES_FLAGS", "DEPLOYER_PRIVATE_KEY", "OPERATOR_PRIVATE_KEY"])
      expect(inCode).toContain(name);
  });

  it("has exactly one row for every variable the code reads", () => {
    const notOnce = [...inCode].filter((name) => documented.filter((row) => row === name).length !== 1);
    expect(notOnce).toEqual([]);
  });

  it("has no row for a variable the code does not read", () => {
    expect(documented.filter((name) => !inCode.has(name))).toEqual([]);
  });
});
