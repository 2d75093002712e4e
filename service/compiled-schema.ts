/**
 * A fast path for Schema's parse of plain shapes: literals, strings, numbers, booleans, null, valid
 * Dates, arrays, structs (optional keys included) and unions of these, with their checks. Compiled
 * once from the schema's AST, it tells whether a value is one Schema would accept and give back as an
 * equal copy; the caller then uses the value itself, and runs Schema for anything else: every refusal
 * and every value the fast path is not sure of is Schema's own answer. The schema stays the one
 * definition; a schema with any other node (a transformation, another declaration, an index signature)
 * compiles to `undefined`.
 *
 * Why: Schema's general parser costs 3-7 µs a mandate, and refusing excess keys takes its slow path
 * (docs/performance.md, "The API").
 */
import { Schema, type SchemaAST } from "effect";

/**
 * Whether a value is one Schema parses to a copy of itself: then the value can stand for Schema's
 * output (`keyOrder`: with its keys in the schema's order too, so that its JSON is the same text).
 */
export type Conforms = (input: unknown) => boolean;

const dateAst = Schema.Date.ast;

const passesChecks = (checks: SchemaAST.Checks, value: unknown, ast: SchemaAST.AST): boolean => {
  for (const check of checks) {
    if (check._tag === "Filter") {
      if (check.run(value, ast, {}) !== undefined) return false;
    } else if (!passesChecks(check.checks, value, ast)) return false;
  }
  return true;
};

const isContainer = (ast: SchemaAST.AST) =>
  ast._tag === "Objects" || ast._tag === "Arrays" || ast._tag === "Declaration" || ast._tag === "Union";

/**
 * The checks are generated as source, one small function per node, and built with `new Function`: a
 * closure shared by every struct saw every shape at the same property loads (megamorphic, about three
 * times slower on a mandate). The source holds only our schemas' property names (as string literals)
 * and indexes into `refs`; literals, filters and ASTs are passed by reference, never printed.
 */
interface Emitter {
  readonly keyOrder: boolean;
  readonly functions: Array<string>;
  readonly refs: Array<unknown>;
}

const ref = (emitter: Emitter, value: unknown): string => `refs[${emitter.refs.push(value) - 1}]`;

const emitFunction = (emitter: Emitter, body: string): string => {
  const name = `check${emitter.functions.length}`;
  emitter.functions.push(`function ${name}(input) {\n${body}\n}`);
  return name;
};

/** Emits the function checking `ast`; its name, or undefined when the node is not handled. */
const emitNode = (ast: SchemaAST.AST, emitter: Emitter): string | undefined => {
  if (ast.encoding !== undefined) return undefined;
  const shape = emitShape(ast, emitter);
  if (shape === undefined) return undefined;
  const shaped = emitFunction(emitter, shape);
  const checks = ast.checks;
  return checks === undefined
    ? shaped
    : emitFunction(
        emitter,
        `return ${shaped}(input) && passesChecks(${ref(emitter, checks)}, input, ${ref(emitter, ast)});`,
      );
};

const emitShape = (ast: SchemaAST.AST, emitter: Emitter): string | undefined => {
  switch (ast._tag) {
    case "String":
      return `return typeof input === "string";`;
    case "Number":
      return `return typeof input === "number";`;
    case "Boolean":
      return `return typeof input === "boolean";`;
    case "Null":
      return "return input === null;";
    case "Literal":
      return `return input === ${ref(emitter, ast.literal)};`;
    case "Declaration":
      // Schema.Date itself (it keeps a valid Date as it is); other declarations are opaque.
      return ast === dateAst ? "return input instanceof Date && !Number.isNaN(input.getTime());" : undefined;
    case "Union":
      return emitUnion(ast, emitter);
    case "Arrays":
      return emitArray(ast, emitter);
    case "Objects":
      return emitObject(ast, emitter);
    default:
      return undefined;
  }
};

// Schema tries the members in order. With at most one container among them, the others being primitives
// that parse to the input itself, any member that passes gives Schema's output.
const emitUnion = (ast: SchemaAST.Union, emitter: Emitter): string | undefined => {
  if (ast.options?.mode === "oneOf" || ast.encodingChecks !== undefined) return undefined;
  if (ast.types.filter(isContainer).length > 1) return undefined;
  const members: Array<string> = [];
  for (const type of ast.types) {
    const member = emitNode(type, emitter);
    if (member === undefined) return undefined;
    members.push(member);
  }
  return `return ${members.length === 0 ? "false" : members.map((member) => `${member}(input)`).join(" || ")};`;
};

const emitArray = (ast: SchemaAST.Arrays, emitter: Emitter): string | undefined => {
  if (ast.elements.length > 0 || ast.rest.length !== 1 || ast.encodingChecks !== undefined) return undefined;
  const element = emitNode(ast.rest[0] as SchemaAST.AST, emitter);
  if (element === undefined) return undefined;
  return [
    "if (!Array.isArray(input) || Object.getPrototypeOf(input) !== Array.prototype) return false;",
    `for (let i = 0; i < input.length; i++) if (!(i in input) || !${element}(input[i])) return false;`,
    "return true;",
  ].join("\n");
};

const emitObject = (ast: SchemaAST.Objects, emitter: Emitter): string | undefined => {
  if (ast.indexSignatures.length > 0 || ast.encodingChecks !== undefined) return undefined;
  const lines = [
    `if (typeof input !== "object" || input === null) return false;`,
    // A plain object: nothing inherited for Schema to read, no toJSON for JSON.stringify to call.
    "const prototype = Object.getPrototypeOf(input);",
    "if (prototype !== Object.prototype && prototype !== null) return false;",
    // Schema's output has exactly the enumerable keys the schema names; so must the value (in the
    // schema's order when asked), and no symbol key.
    "const keys = Object.keys(input);",
    "let present = 0;",
  ];
  for (const signature of ast.propertySignatures) {
    if (typeof signature.name !== "string") return undefined;
    const check = emitNode(signature.type, emitter);
    if (check === undefined) return undefined;
    const key = JSON.stringify(signature.name);
    const optional = signature.type.context?.isOptional ?? false;
    lines.push(
      `if (!Object.hasOwn(input, ${key})) {`,
      optional ? `  if (${key} in input) return false;` : "  return false;",
      "} else {",
      ...(emitter.keyOrder ? [`  if (keys[present] !== ${key}) return false;`] : []),
      "  present++;",
      `  if (!${check}(input[${key}])) return false;`,
      "}",
    );
  }
  lines.push("return keys.length === present && Object.getOwnPropertySymbols(input).length === 0;");
  return lines.join("\n");
};

/**
 * The check for `schema` (decode and encode alike: none of the shapes it handles transforms), or
 * undefined when the schema has a node it does not handle.
 */
export const compileConforms = (
  schema: Schema.Top,
  options: { readonly keyOrder: boolean },
): Conforms | undefined => {
  const emitter: Emitter = { keyOrder: options.keyOrder, functions: [], refs: [] };
  const root = emitNode(schema.ast, emitter);
  if (root === undefined) return undefined;
  const source = `"use strict";\n${emitter.functions.join("\n")}\nreturn ${root};`;
  try {
    return new Function("refs", "passesChecks", source)(emitter.refs, passesChecks) as Conforms;
  } catch (error) {
    // Node run with --disallow-code-generation-from-strings: no fast path, Schema answers every value.
    // Anything else is a bug in the generated source, and must not hide behind the slow path.
    if (error instanceof EvalError) return undefined;
    throw error;
  }
};
