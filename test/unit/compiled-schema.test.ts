import { execFileSync } from "node:child_process";
import { Schema, type SchemaAST } from "effect";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { listOf } from "../../service/chains/objects.ts";
import { ChargeObject } from "../../service/charges/charge-object.ts";
import { compileConforms } from "../../service/compiled-schema.ts";
import { charge, mandate, pendingMandate } from "../../service/http/examples/mandates.ts";
import { page } from "../../service/http/examples/shared.ts";
import { MandateObject, MandateRow } from "../../service/mandates/mandate-object.ts";

/** Shapes the fast path handles, beyond the real objects: optional keys, nesting, checks, unions. */
const Nested = Schema.Struct({
  kind: Schema.Literals(["a", "b"]),
  count: Schema.Int.check(Schema.isGreaterThan(0)),
  note: Schema.optionalKey(Schema.String),
  tags: Schema.Array(Schema.String.check(Schema.isMinLength(1))),
  inner: Schema.NullOr(Schema.Struct({ flag: Schema.Boolean, at: Schema.NullOr(Schema.Date) })),
});

const schemas = {
  MandateObject,
  MandateList: listOf(MandateObject, "MandateList"),
  ChargeObject,
  MandateRow,
  Nested,
};

/** Wrong values of every kind, for any node. */
const stray = fc.oneof(
  fc.constantFrom(null, undefined, 0, -1, 1.5, Number.NaN, "", "x", true, [], {}, new Date(Number.NaN)),
  fc.anything(),
);

/**
 * Values derived from a schema's AST: half of them what it describes (optional keys left out now and
 * then), half with wrong values, missing and extra keys and reordered keys mixed in at every level.
 */
const valuesOf = (ast: SchemaAST.AST): fc.Arbitrary<unknown> =>
  fc.oneof(shapedBy(ast, false), shapedBy(ast, true));

const shapedBy = (ast: SchemaAST.AST, noisy: boolean): fc.Arbitrary<unknown> => {
  const right = rightValuesOf(ast, noisy);
  return noisy ? fc.oneof({ arbitrary: right, weight: 20 }, { arbitrary: stray, weight: 1 }) : right;
};

const rightValuesOf = (ast: SchemaAST.AST, noisy: boolean): fc.Arbitrary<unknown> => {
  switch (ast._tag) {
    case "String":
      return fc.oneof(fc.string(), fc.constant("mdt_1"));
    case "Number":
      return fc.oneof(fc.integer(), fc.double(), fc.constant(0));
    case "Boolean":
      return fc.boolean();
    case "Null":
      return fc.constant(null);
    case "Literal":
      return fc.constant(ast.literal);
    case "Declaration":
      return fc.date();
    case "Union":
      return fc.oneof(...ast.types.map((type) => shapedBy(type, noisy)));
    case "Arrays":
      return fc.array(shapedBy(ast.rest[0] as SchemaAST.AST, noisy), { maxLength: 4 });
    case "Objects": {
      const fields = ast.propertySignatures.map((signature) =>
        fc.tuple(
          fc.constant(String(signature.name)),
          shapedBy(signature.type, noisy),
          noisy || signature.type.context?.isOptional ? fc.nat(20) : fc.constant(1),
        ),
      );
      return fc
        .tuple(
          fc.tuple(...fields),
          fc.array(fc.tuple(fc.constantFrom("extra", "toString", "id"), stray), { maxLength: noisy ? 1 : 0 }),
          noisy ? fc.boolean() : fc.constant(false),
        )
        .map(([entries, extras, reorder]) => {
          // A field is left out now and then (roll 0), and the keys are sometimes reordered.
          const kept = entries.filter(([, , roll]) => roll !== 0);
          const ordered = reorder ? [...kept].sort(([, , a], [, , b]) => a - b) : kept;
          const value: Record<string, unknown> = {};
          for (const [name, field] of ordered) value[name] = field;
          for (const [name, field] of extras) value[name] = field;
          return value;
        });
    }
    default:
      return stray;
  }
};

const schemaEncode = (schema: Schema.Top, value: unknown) =>
  Schema.encodeUnknownExit(schema as Schema.Codec<unknown, unknown>)(value, { onExcessProperty: "error" });
const schemaDecode = (schema: Schema.Top, value: unknown) =>
  Schema.decodeUnknownExit(schema as Schema.Codec<unknown, unknown>)(value);

describe("compiled schema fast path", () => {
  it("compiles the API's objects and its rows", () => {
    for (const schema of Object.values(schemas)) {
      expect(compileConforms(schema, { keyOrder: true })).toBeTypeOf("function");
      expect(compileConforms(schema, { keyOrder: false })).toBeTypeOf("function");
    }
  });

  it("leaves every value to Schema when Node may not generate code (--disallow-code-generation-from-strings)", () => {
    const script = `
      const { compileConforms } = await import(${JSON.stringify(new URL("../../service/compiled-schema.ts", import.meta.url).href)});
      const { MandateObject } = await import(${JSON.stringify(new URL("../../service/mandates/mandate-object.ts", import.meta.url).href)});
      console.log(typeof compileConforms(MandateObject, { keyOrder: true }));`;
    const run = (flags: ReadonlyArray<string>) =>
      execFileSync(process.execPath, [...flags, "--input-type=module", "-e", script], {
        encoding: "utf8",
      }).trim();
    expect(run([])).toBe("function");
    expect(run(["--disallow-code-generation-from-strings"])).toBe("undefined");
  });

  it("leaves a schema with a transformation or a declaration it does not know to Schema", () => {
    expect(
      compileConforms(Schema.Struct({ n: Schema.NumberFromString }), { keyOrder: true }),
    ).toBeUndefined();
    expect(compileConforms(Schema.Array(Schema.BigInt), { keyOrder: true })).toBeUndefined();
    expect(compileConforms(Schema.Record(Schema.String, Schema.Number), { keyOrder: true })).toBeUndefined();
  });

  it("passes the documented examples, so the API answers them without Schema's parser", () => {
    const conforms = compileConforms(MandateObject, { keyOrder: true });
    expect(conforms?.(mandate)).toBe(true);
    expect(conforms?.(pendingMandate)).toBe(true);
    expect(compileConforms(ChargeObject, { keyOrder: true })?.(charge)).toBe(true);
    expect(compileConforms(schemas.MandateList, { keyOrder: true })?.(page(mandate))).toBe(true);
  });

  it("refuses what Schema refuses: an excess key, a missing one, a wrong type, a failed check", () => {
    const conforms = compileConforms(Nested, { keyOrder: true });
    const good = { kind: "a", count: 2, tags: ["t"], inner: { flag: true, at: new Date(0) } };
    expect(conforms?.(good)).toBe(true);
    expect(conforms?.({ ...good, note: "n" })).toBe(false); // a key out of the schema's order
    expect(conforms?.({ kind: "a", count: 2, note: "n", tags: [], inner: null })).toBe(true);
    expect(conforms?.({ ...good, extra: 1 })).toBe(false);
    expect(conforms?.({ ...good, count: 1.5 })).toBe(false);
    expect(conforms?.({ ...good, count: 0 })).toBe(false);
    expect(conforms?.({ ...good, tags: [""] })).toBe(false);
    expect(conforms?.({ ...good, inner: { flag: true, at: new Date(Number.NaN) } })).toBe(false);
    const { count: _, ...missing } = good;
    expect(conforms?.(missing)).toBe(false);
  });

  for (const [name, schema] of Object.entries(schemas)) {
    it(`${name}: a value it passes is one Schema encodes to the same JSON (excess keys refused)`, () => {
      const conforms = compileConforms(schema, { keyOrder: true });
      let passed = 0;
      fc.assert(
        fc.property(valuesOf(schema.ast), (value) => {
          if (!conforms?.(value)) return;
          passed++;
          const exit = schemaEncode(schema, value);
          expect(exit._tag).toBe("Success");
          if (exit._tag === "Success") expect(JSON.stringify(value)).toBe(JSON.stringify(exit.value));
        }),
        { numRuns: 1500 },
      );
      // The generator reaches values the fast path takes, so the property is not vacuous.
      expect(passed).toBeGreaterThan(10);
    });

    it(`${name}: a value it passes is one Schema decodes to an equal value`, () => {
      const conforms = compileConforms(schema, { keyOrder: false });
      let passed = 0;
      fc.assert(
        fc.property(valuesOf(schema.ast), (value) => {
          if (!conforms?.(value)) return;
          passed++;
          const exit = schemaDecode(schema, value);
          expect(exit._tag).toBe("Success");
          if (exit._tag === "Success") expect(exit.value).toStrictEqual(value);
        }),
        { numRuns: 1500 },
      );
      expect(passed).toBeGreaterThan(10);
    });
  }
});
