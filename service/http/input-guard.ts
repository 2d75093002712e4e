/**
 * Checks every string of a request before a route sees it, so no input can make Postgres fail a
 * statement (a NUL byte is "invalid byte sequence for UTF8", and jsonb refuses `\u0000`) or be
 * silently altered on the way in (a lone UTF-16 surrogate becomes U+FFFD). Pure: the HTTP layer maps
 * the findings to 404 (path ids) or 400 (query and body).
 */
import { type NotFound, resourceMissing } from "../errors.ts";
import { ID_NOUNS, ID_PREFIXES, type IdKind } from "../ids.ts";

/** Longest string accepted anywhere in a query or body (characters); fields have their own, lower limits. */
export const MAX_STRING_LENGTH = 5000;

/** Deepest nesting of arrays and objects accepted in a body (no request of ours needs more than 3). */
export const MAX_DEPTH = 20;

export type StringProblem = "nul" | "surrogate" | "too_long";
export type InputProblemKind = StringProblem | "too_deep";

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export const stringProblem = (value: string, max = MAX_STRING_LENGTH): StringProblem | undefined => {
  if (value.includes("\u0000")) return "nul";
  if (LONE_SURROGATE.test(value)) return "surrogate";
  if (value.length > max) return "too_long";
  return undefined;
};

export const describeProblem = (problem: InputProblemKind, max = MAX_STRING_LENGTH): string =>
  problem === "too_deep"
    ? `must not nest arrays or objects deeper than ${MAX_DEPTH} levels`
    : problem === "nul"
      ? "must not contain NUL characters"
      : problem === "surrogate"
        ? "must be valid Unicode (it contains a lone surrogate)"
        : `must be at most ${max} characters`;

/** A version of `value` safe to echo in a message: unsafe characters replaced, cut short. */
export const printable = (value: string, max = 80): string =>
  value
    .slice(0, max)
    .replaceAll("\u0000", "\uFFFD")
    .replace(new RegExp(LONE_SURROGATE.source, "g"), "\uFFFD");

export interface InputProblem {
  /** Dotted path of the field, as schema errors name it (`tokens[0]`, `metadata.note`); "" for a key. */
  readonly param: string;
  readonly problem: InputProblemKind;
}

const join = (path: string, key: string | number) =>
  typeof key === "number" ? `${path}[${key}]` : path === "" ? key : `${path}.${key}`;

/** The first string (key or value) in a decoded JSON value or query object that can't be stored as given. */
export const findInputProblem = (value: unknown, path = "", depth = 0): InputProblem | undefined => {
  if (depth > MAX_DEPTH) return { param: path, problem: "too_deep" };
  if (typeof value === "string") {
    const problem = stringProblem(value);
    return problem ? { param: path, problem } : undefined;
  }
  if (Array.isArray(value)) {
    for (const [index, item] of value.entries()) {
      const found = findInputProblem(item, join(path, index), depth + 1);
      if (found) return found;
    }
    return undefined;
  }
  if (value !== null && typeof value === "object") {
    for (const [key, item] of Object.entries(value)) {
      const keyProblem = stringProblem(key);
      if (keyProblem) return { param: join(path, printable(key)), problem: keyProblem };
      const found = findInputProblem(item, join(path, key), depth + 1);
      if (found) return found;
    }
  }
  return undefined;
};

/** What a path segment must look like for the route to find anything: an id of one kind, or a pattern. */
export interface PathParam<E> {
  readonly pattern: RegExp;
  /** The route's own answer for an id it does not know (given a printable copy of the value). */
  readonly notFound: (value: string) => E;
}

/** A path id of one kind (`mdt_` + 26 Crockford base32 characters); anything else is that kind's 404. */
export const idParam = (kind: IdKind): PathParam<NotFound> => ({
  pattern: new RegExp(`^${ID_PREFIXES[kind]}_[0-9A-HJKMNP-TV-Z]{26}$`),
  notFound: (value) => resourceMissing(ID_NOUNS[kind], value),
});
