/**
 * Fuzzed request bodies for the bad-input suites: values of every JSON kind, and bodies around a valid
 * one (fields dropped, replaced by anything, unknown fields added) that must either create the object
 * or be refused with a 4xx in the error shape that changed nothing; never a 500.
 */
import fc from "fast-check";
import { expect } from "vitest";
import { api, expectErrorShape } from "./helpers.ts";

export const FUZZ_RUNS = Number(process.env.FUZZ_RUNS ?? 150);

/** Any JSON value, with `samples` (strings near the valid ones) mixed in. */
export const anyValue = (samples: readonly string[]) =>
  fc.oneof(
    fc.string(),
    fc.constantFrom(...samples, "", " ", "1e3", "-0", "NaN", "Infinity"),
    fc.integer(),
    fc.double(),
    fc.boolean(),
    fc.constant(null),
    fc.array(fc.string(), { maxLength: 3 }),
    fc.dictionary(fc.string(), fc.string(), { maxKeys: 2 }),
  );

/** Bodies around `valid`: some of `droppable` left out, up to three of `fields` replaced, unknown keys added. */
export const bodiesAround = (
  valid: Readonly<Record<string, unknown>>,
  fields: readonly string[],
  droppable: readonly string[],
  values: fc.Arbitrary<unknown>,
) =>
  fc
    .record({
      drop: fc.subarray([...droppable]),
      replace: fc.dictionary(fc.constantFrom(...fields), values, { maxKeys: 3 }),
      extra: fc.dictionary(fc.string({ minLength: 1, maxLength: 8 }), values, { maxKeys: 2 }),
    })
    .map(({ drop, replace, extra }) => {
      const body: Record<string, unknown> = { ...valid, ...replace, ...extra };
      for (const field of drop) delete body[field];
      return body;
    });

/** POSTs each body to `path`: a 200 with an `object`, or a 4xx that left `counts` as they were. */
export const assertCreatedOrNothingChanged = (options: {
  readonly path: string;
  readonly key: string;
  readonly object: string;
  readonly bodies: fc.Arbitrary<Record<string, unknown>>;
  readonly counts: () => Promise<unknown>;
}) =>
  fc.assert(
    fc.asyncProperty(options.bodies, async (body) => {
      const before = await options.counts();
      const response = await api(options.path, { key: options.key, body });
      expect(response.status, response.text).not.toBeGreaterThanOrEqual(500);
      if (response.status === 200) {
        expect(response.json.object).toBe(options.object);
        return;
      }
      expect(response.status).toBeGreaterThanOrEqual(400);
      expectErrorShape(response.json);
      expect(await options.counts()).toEqual(before);
    }),
    { numRuns: FUZZ_RUNS },
  );
