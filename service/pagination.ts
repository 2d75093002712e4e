/**
 * Cursor paging as Stripe does it: newest first, `limit`, and `starting_after` or `ending_before` (an
 * object id). Lists are read with `pageRows` (db/query.ts).
 */
import { Schema } from "effect";
import { ID_PATTERN } from "./ids.ts";

const Cursor = (description: string) =>
  Schema.String.check(Schema.isPattern(ID_PATTERN)).annotate({ description });

export const PageQuery = Schema.Struct({
  limit: Schema.optionalKey(
    Schema.FiniteFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 100 })).annotate({
      description: "1-100, default 10",
    }),
  ),
  starting_after: Schema.optionalKey(
    Cursor("Cursor: the id of the last object of the previous page; the page holds older objects"),
  ),
  ending_before: Schema.optionalKey(
    Cursor(
      "Cursor: the id of the first object of the current page; the page holds the newer objects just before it (not with starting_after)",
    ),
  ),
});
