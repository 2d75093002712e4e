/** Cursor pagination, as Stripe does it: newest first, `limit` and `starting_after` (an object id). */
import { Schema } from "effect";
import { ID_PATTERN } from "./ids.ts";

export const PageQuery = Schema.Struct({
  limit: Schema.optionalKey(
    Schema.FiniteFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 100 })).annotate({
      description: "1-100, default 10",
    }),
  ),
  starting_after: Schema.optionalKey(
    Schema.String.check(Schema.isPattern(ID_PATTERN)).annotate({
      description: "Cursor: the id of the last object of the previous page",
    }),
  ),
});

/** `rows` were fetched with `limit + 1`: the extra one only says there is more. */
export const pageOf = <A>(
  rows: readonly A[],
  limit: number,
): { object: "list"; data: A[]; has_more: boolean } => ({
  object: "list",
  data: rows.slice(0, limit),
  has_more: rows.length > limit,
});
