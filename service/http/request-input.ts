/**
 * Reading a request's input: the JSON body of a POST, the query string of a GET and the path's params,
 * each checked (no string Postgres cannot store) and decoded with the route's schema, unknown keys
 * refused. Every refusal is an ApiFailure for the one error shape.
 */
import { Result, Schema } from "effect";
import type { Context as HonoContext } from "hono";
import { type ApiFailure, HttpRefusal, InvalidRequest, type NotFound } from "../errors.ts";
import { schemaErrorIssues } from "../schema-errors.ts";
import {
  describeProblem,
  findInputProblem,
  type PathParam,
  printable,
  stringProblem,
} from "./input-guard.ts";

const bodyFailure = (issue: ReturnType<typeof schemaErrorIssues>[number]): InvalidRequest => {
  if (issue.kind === "missing")
    return new InvalidRequest({
      code: "parameter_missing",
      message: `Missing required param: ${issue.param}.`,
      param: issue.param,
    });
  if (issue.kind === "unknown")
    return new InvalidRequest({
      code: "parameter_unknown",
      message: `Received unknown parameter: ${issue.param}.`,
      param: issue.param,
    });
  return new InvalidRequest({
    code: "parameter_invalid",
    message: `Invalid ${issue.param === "" ? "request body" : issue.param}: ${issue.message}.`,
    param: issue.param === "" ? null : issue.param,
  });
};

const NoInput = Schema.Struct({});

/** Each route's input decoder, built on its first request rather than on every one. */
const decoders = new WeakMap<Schema.Top, ReturnType<typeof Schema.decodeUnknownResult>>();
const decoderOf = (schema: Schema.Codec<unknown, unknown>) => {
  let decoder = decoders.get(schema);
  if (decoder === undefined) {
    decoder = Schema.decodeUnknownResult(schema);
    decoders.set(schema, decoder);
  }
  return decoder;
};

/** Decodes a request's input (body or query) with the route's schema; unknown keys are refused. */
export const decodeInput = (
  schema: Schema.Codec<unknown, unknown> | undefined,
  input: unknown,
  what: "body" | "query",
): Result.Result<unknown, ApiFailure> => {
  const unsafe = findInputProblem(input);
  if (unsafe)
    return Result.fail(
      new InvalidRequest({
        code: "parameter_invalid",
        message: `Invalid ${unsafe.param === "" ? what : unsafe.param}: ${describeProblem(unsafe.problem)}.`,
        param: unsafe.param === "" ? null : unsafe.param,
      }),
    );
  // A route without an input schema takes nothing. (Effect's Schema does not flag excess keys on an
  // empty struct, so this is checked here.)
  const [extra] =
    schema === undefined && typeof input === "object" && input !== null ? Object.keys(input) : [];
  if (extra !== undefined)
    return Result.fail(bodyFailure({ kind: "unknown", param: printable(extra), message: "" }));
  const decoded = decoderOf(schema ?? NoInput)(input, {
    onExcessProperty: "error",
    errors: "all",
  });
  if (Result.isSuccess(decoded)) return Result.succeed(decoded.success);
  const [first] = schemaErrorIssues(decoded.failure);
  return Result.fail(
    first
      ? bodyFailure(first)
      : new InvalidRequest({ code: "parameter_invalid", message: `Invalid ${what}.`, param: null }),
  );
};

/** The query string as an object, decoded with the route's schema. */
export const decodeQuery = (c: HonoContext, schema: Schema.Codec<unknown, unknown> | undefined) => {
  const url = c.req.url;
  // A route that takes no query, asked without one (every GET by id): nothing to decode.
  if (schema === undefined && !url.includes("?")) return Result.succeed({});
  return decodeInput(schema, Object.fromEntries(new URL(url).searchParams), "query");
};

/** Reads and decodes a JSON body (empty means `{}`); `raw` is the parsed JSON, `value` the decoded input. */
export const readBody = async (
  c: HonoContext,
  schema: Schema.Codec<unknown, unknown> | undefined,
): Promise<Result.Result<{ readonly raw: unknown; readonly value: unknown }, ApiFailure>> => {
  const text = await c.req.text();
  const contentType = c.req.header("content-type");
  if (text.length > 0 && !(contentType && /^application\/json\s*(;|$)/i.test(contentType)))
    return Result.fail(
      new HttpRefusal({
        status: 415,
        code: "unsupported_media_type",
        message: "Request bodies must be JSON, sent with Content-Type: application/json.",
      }),
    );
  let parsed: unknown = {};
  if (text.trim().length > 0) {
    try {
      parsed = JSON.parse(text);
    } catch {
      return Result.fail(
        new InvalidRequest({
          code: "invalid_json",
          message: "The request body is not valid JSON.",
          param: null,
        }),
      );
    }
  }
  if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed))
    return Result.fail(
      new InvalidRequest({
        code: "invalid_body",
        message: "The request body must be a JSON object.",
        param: null,
      }),
    );
  return Result.map(decodeInput(schema, parsed, "body"), (value) => ({ raw: parsed, value }));
};

/**
 * The path's params, or the route's own 404 for one that can't name anything (a malformed id never
 * reaches a query). A param the route did not declare must at least be a storable string.
 */
export const decodeParams = (
  c: HonoContext,
  declared: Readonly<Record<string, PathParam<NotFound>>> | undefined,
): Result.Result<Record<string, string>, ApiFailure> => {
  const params = c.req.param() as Record<string, string>;
  for (const [name, value] of Object.entries(params)) {
    const expected = declared?.[name];
    if (expected ? !expected.pattern.test(value) : stringProblem(value, 255) !== undefined)
      return Result.fail(
        expected
          ? expected.notFound(printable(value))
          : new HttpRefusal({
              status: 404,
              code: "route_not_found",
              message: `Unrecognized request URL (${c.req.method}: ${printable(c.req.path, 300)}).`,
            }),
      );
  }
  return Result.succeed(params);
};
