/**
 * The API reference's operation names: every route's `summary` is a short name, as in Stripe's reference
 * ("List chains", "Create a mandate", "Return a charge"), the sidebar entry at /docs; the sentence that
 * explains the operation belongs in its `description`. Taken from the route table, so a new route is
 * checked as soon as it exists.
 */
import { describe, expect, it } from "vitest";
import { routes } from "../../service/main.ts";

/** The verbs an operation's name may start with. A new one belongs here only if none of these fits. */
const VERBS = [
  "List",
  "Create",
  "Retrieve",
  "Update",
  "Delete",
  "Cancel",
  "Return",
  "Release",
  "Charge",
  "Configure",
  "Send",
  "Replay",
  "Rotate",
  "Fund",
  "Authorize",
  "Advance",
  "Pay",
  // x402's facilitator operations, by the protocol's names.
  "Verify",
  "Settle",
] as const;

const MAX_WORDS = 6;

const byOperation = routes.map((route) => [`${route.method} ${route.path}`, route] as const);

describe("operation summaries", () => {
  it.each(byOperation)("%s: a short name, verb first, sentence case, no period", (_, route) => {
    const words = route.summary.split(" ");
    expect(words.length, route.summary).toBeLessThanOrEqual(MAX_WORDS);
    expect(VERBS, route.summary).toContain(words[0]);
    expect(route.summary, "no closing period").not.toMatch(/\.$/);
    expect(route.summary, "one sentence, no clauses").not.toMatch(/[.:;()]/);
    expect(
      words.slice(1).filter((word) => /^[A-Z]/.test(word)),
      `${route.summary}: sentence case`,
    ).toEqual([]);
  });

  it("names each operation once", () => {
    const summaries = routes.map((route) => route.summary);
    expect(summaries.filter((summary, i) => summaries.indexOf(summary) !== i)).toEqual([]);
  });

  it("says in the description, not the name, that a test helper works in test mode only", () => {
    const helpers = routes.filter((route) => route.testOnly);
    expect(helpers.length).toBeGreaterThan(0);
    for (const route of helpers) {
      expect(route.summary).not.toMatch(/test mode/i);
      expect(route.description, route.operationId).toMatch(/^Test mode: /);
    }
  });
});
