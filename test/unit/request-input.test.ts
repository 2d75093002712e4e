import { Result, Schema } from "effect";
import { describe, expect, it } from "vitest";
import { decodeInput } from "../../service/http/request-input.ts";

describe("decodeInput", () => {
  it("refuses any key for an operation that takes nothing", () => {
    expect(Result.isSuccess(decodeInput(undefined, {}, "body"))).toBe(true);
    const refused = decodeInput(undefined, { reason: "x" }, "body");
    expect(Result.isFailure(refused) && refused.failure).toMatchObject({
      code: "parameter_unknown",
      param: "reason",
    });
    const query = decodeInput(undefined, { "a\u0000": "1" }, "query");
    expect(Result.isFailure(query)).toBe(true);
  });

  it("refuses unknown keys beside a schema's own", () => {
    const schema = Schema.Struct({ a: Schema.optionalKey(Schema.String) }) as Schema.Codec<unknown, unknown>;
    expect(Result.isSuccess(decodeInput(schema, { a: "x" }, "body"))).toBe(true);
    const refused = decodeInput(schema, { b: 1 }, "body");
    expect(Result.isFailure(refused) && refused.failure).toMatchObject({
      code: "parameter_unknown",
      param: "b",
    });
  });
});
