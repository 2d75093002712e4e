import { Result, Schema } from "effect";
import { describe, expect, it } from "vitest";
import { schemaErrorIssues } from "../../service/schema-errors.ts";

describe("schema errors", () => {
  it("name each offending field with its kind", () => {
    const S = Schema.Struct({ a: Schema.String, b: Schema.optionalKey(Schema.Array(Schema.Int)) });
    const decoded = Schema.decodeUnknownResult(S)(
      { b: [1, "x"], zz: 1 },
      { onExcessProperty: "error", errors: "all" },
    );
    if (!Result.isFailure(decoded)) throw new Error("expected a failure");
    expect(schemaErrorIssues(decoded.failure).map(({ param, kind }) => [param, kind])).toEqual([
      ["zz", "unknown"],
      ["a", "missing"],
      ["b[1]", "invalid"],
    ]);
  });
});
