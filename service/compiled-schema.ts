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

type Check = (input: unknown) => boolean;

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

const compileNode = (ast: SchemaAST.AST, keyOrder: boolean): Check | undefined => {
  if (ast.encoding !== undefined) return undefined;
  const shape = compileShape(ast, keyOrder);
  const checks = ast.checks;
  if (shape === undefined || checks === undefined) return shape;
  return (input) => shape(input) && passesChecks(checks, input, ast);
};

const compileShape = (ast: SchemaAST.AST, keyOrder: boolean): Check | undefined => {
  switch (ast._tag) {
    case "String":
      return (input) => typeof input === "string";
    case "Number":
      return (input) => typeof input === "number";
    case "Boolean":
      return (input) => typeof input === "boolean";
    case "Null":
      return (input) => input === null;
    case "Literal": {
      const literal = ast.literal;
      return (input) => input === literal;
    }
    case "Declaration":
      // Schema.Date itself (it keeps a valid Date as it is); other declarations are opaque.
      return ast === dateAst ? (input) => input instanceof Date && !Number.isNaN(input.getTime()) : undefined;
    case "Union":
      return compileUnion(ast, keyOrder);
    case "Arrays":
      return compileArray(ast, keyOrder);
    case "Objects":
      return compileObject(ast, keyOrder);
    default:
      return undefined;
  }
};

// Schema tries the members in order. With at most one container among them, the others being primitives
// that parse to the input itself, any member that passes gives Schema's output.
const compileUnion = (ast: SchemaAST.Union, keyOrder: boolean): Check | undefined => {
  if (ast.options?.mode === "oneOf" || ast.encodingChecks !== undefined) return undefined;
  if (ast.types.filter(isContainer).length > 1) return undefined;
  const members: Array<Check> = [];
  for (const type of ast.types) {
    const member = compileNode(type, keyOrder);
    if (member === undefined) return undefined;
    members.push(member);
  }
  return (input) => {
    for (const member of members) if (member(input)) return true;
    return false;
  };
};

const compileArray = (ast: SchemaAST.Arrays, keyOrder: boolean): Check | undefined => {
  if (ast.elements.length > 0 || ast.rest.length !== 1 || ast.encodingChecks !== undefined) return undefined;
  const element = compileNode(ast.rest[0] as SchemaAST.AST, keyOrder);
  if (element === undefined) return undefined;
  return (input) => {
    if (!Array.isArray(input) || Object.getPrototypeOf(input) !== Array.prototype) return false;
    for (let i = 0; i < input.length; i++) if (!(i in input) || !element(input[i])) return false;
    return true;
  };
};

interface Property {
  readonly name: string;
  readonly optional: boolean;
  readonly check: Check;
}

const compileObject = (ast: SchemaAST.Objects, keyOrder: boolean): Check | undefined => {
  if (ast.indexSignatures.length > 0 || ast.encodingChecks !== undefined) return undefined;
  const properties: Array<Property> = [];
  for (const signature of ast.propertySignatures) {
    if (typeof signature.name !== "string") return undefined;
    const check = compileNode(signature.type, keyOrder);
    if (check === undefined) return undefined;
    properties.push({ name: signature.name, optional: signature.type.context?.isOptional ?? false, check });
  }
  return (input) => {
    if (typeof input !== "object" || input === null) return false;
    // A plain object: nothing inherited for Schema to read, no toJSON for JSON.stringify to call.
    const prototype = Object.getPrototypeOf(input);
    if (prototype !== Object.prototype && prototype !== null) return false;
    const record = input as Record<string, unknown>;
    // Schema's output has exactly the enumerable keys the schema names; so must the value (in the
    // schema's order when asked), and no symbol key.
    const keys = Object.keys(record);
    let present = 0;
    for (const property of properties) {
      const name = property.name;
      if (!Object.hasOwn(record, name)) {
        if (name in record || !property.optional) return false;
        continue;
      }
      if (keyOrder && keys[present] !== name) return false;
      present++;
      if (!property.check(record[name])) return false;
    }
    return keys.length === present && Object.getOwnPropertySymbols(record).length === 0;
  };
};

/**
 * The check for `schema` (decode and encode alike: none of the shapes it handles transforms), or
 * undefined when the schema has a node it does not handle.
 */
export const compileConforms = (
  schema: Schema.Top,
  options: { readonly keyOrder: boolean },
): Conforms | undefined => compileNode(schema.ast, options.keyOrder);
