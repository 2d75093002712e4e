import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  findInputProblem,
  idParam,
  MAX_DEPTH,
  MAX_STRING_LENGTH,
  printable,
  stringProblem,
} from "../../service/http/input-guard.ts";

describe("input guard", () => {
  it("finds NUL, lone surrogates and over-long strings, and accepts well-formed Unicode", () => {
    expect(stringProblem("a\u0000b")).toBe("nul");
    expect(stringProblem("\ud800")).toBe("surrogate");
    expect(stringProblem("x\udc00")).toBe("surrogate");
    expect(stringProblem("\udc00\ud800")).toBe("surrogate");
    expect(stringProblem("x".repeat(MAX_STRING_LENGTH + 1))).toBe("too_long");
    expect(stringProblem("x".repeat(MAX_STRING_LENGTH))).toBeUndefined();
    expect(stringProblem("😀 é \u202e")).toBeUndefined();
  });

  it("accepts every string that survives a UTF-8 round trip without NUL (property)", () => {
    fc.assert(
      fc.property(fc.string({ unit: "binary", maxLength: 50 }), (value) => {
        const roundTrips = Buffer.from(value, "utf8").toString("utf8") === value;
        expect(stringProblem(value) === undefined).toBe(roundTrips && !value.includes("\u0000"));
      }),
    );
    fc.assert(
      fc.property(
        fc.string({
          unit: fc.integer({ min: 0, max: 0xffff }).map((n) => String.fromCharCode(n)),
          maxLength: 20,
        }),
        (value) => {
          const storable = Buffer.from(value, "utf8").toString("utf8") === value && !value.includes("\u0000");
          expect(stringProblem(value) === undefined).toBe(storable);
        },
      ),
    );
  });

  it("names the offending field of a nested value, keys included", () => {
    expect(findInputProblem({ a: "ok", tokens: ["USDC", "x\u0000"] })).toEqual({
      param: "tokens[1]",
      problem: "nul",
    });
    expect(findInputProblem({ usage: { unit: "\ud800" } })).toEqual({
      param: "usage.unit",
      problem: "surrogate",
    });
    expect(findInputProblem({ "k\u0000": 1 })).toEqual({ param: "k\uFFFD", problem: "nul" });
    expect(findInputProblem(JSON.parse('{"__proto__":"\\u0000"}'))).toEqual({
      param: "__proto__",
      problem: "nul",
    });
    expect(findInputProblem({ a: [1, true, null, { b: "fine" }] })).toBeUndefined();
  });

  it("refuses nesting deeper than the limit without overflowing the stack", () => {
    const deep = (n: number) => JSON.parse(`${"[".repeat(n)}1${"]".repeat(n)}`) as unknown;
    expect(findInputProblem(deep(MAX_DEPTH))).toBeUndefined();
    expect(findInputProblem(deep(MAX_DEPTH + 2))?.problem).toBe("too_deep");
    expect(findInputProblem(deep(100_000))?.problem).toBe("too_deep");
  });

  it("path ids match only their own prefix", () => {
    const mandate = idParam("mandate");
    expect(mandate.pattern.test("mdt_01JD3ZZZZZZZZZZZZZZZZZZZZZ")).toBe(true);
    expect(mandate.pattern.test("ch_01JD3ZZZZZZZZZZZZZZZZZZZZZ")).toBe(false);
    expect(mandate.pattern.test("mdt_01JD3ZZZZZZZZZZZZZZZZZZZZZ\u0000")).toBe(false);
    expect(mandate.pattern.test("mdt_01JD3ZZZZZZZZZZZZZZZZZZZZI")).toBe(false);
    expect(mandate.notFound("x")).toMatchObject({
      code: "resource_missing",
      message: "No such mandate: 'x'",
    });
  });

  it("prints values without NUL or lone surrogates, cut short", () => {
    expect(printable("a\u0000\ud800b")).toBe("a\uFFFD\uFFFDb");
    expect(printable(`${"x".repeat(79)}😀`)).toBe(`${"x".repeat(79)}\uFFFD`);
  });
});

describe("every route declares its path params", () => {
  it("so the HTTP layer can answer a malformed id with the route's own 404", async () => {
    const { routes } = await import("../../service/main.ts");
    const { authorizationRoutes } = await import("../../service/http/routes/authorization.ts");
    const { payPageRoutes } = await import("../../service/http/routes/pay-page.ts");
    for (const route of [...routes, ...authorizationRoutes, ...payPageRoutes]) {
      const names = [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);
      expect(Object.keys(route.params ?? {}).sort(), route.path).toEqual(names.sort());
    }
  });
});
