/**
 * One way to read a table: a `Relation` names what to select and from where (fragments fixed when the
 * owning module is loaded), and `selectRows`, `lockRows` and `pageRows` add conditions as fragments. No
 * caller builds SQL text: conditions are `sql` template fragments whose values are bound parameters.
 */
import { Effect, type Schema } from "effect";
import { type SqlClient, type SqlError, Statement } from "effect/sql";
import { type InvalidRequest, invalidParam } from "../errors.ts";
import { decodeRows } from "./rows.ts";

export type Fragment = Statement.Fragment;

/** SQL text written by us, once (a column list, a join): never anything a caller sent. */
export const fixed = (text: string): Fragment => Statement.fragment([Statement.literal(text)]);

/**
 * A column of values for `unnest`, cast to its type. The driver cannot infer the type of an array whose
 * every element is null (and refuses it), so such a column is written as an `array_fill` of nulls.
 */
export const nullableArray = (
  sql: SqlClient.SqlClient,
  values: ReadonlyArray<string | number | Date | null>,
  type: "text" | "int" | "timestamptz",
): Fragment =>
  values.some((value) => value !== null)
    ? sql`${values}::${fixed(type)}[]`
    : sql`array_fill(NULL::${fixed(type)}, ARRAY[${values.length}::int])`;

export interface Relation<A> {
  /** `FROM` target: a table with its alias, or a join. */
  readonly from: Fragment;
  readonly columns: Fragment;
  /** The id column (`m.id`): lists are ordered by it, newest first. */
  readonly id: Fragment;
  /** The alias whose rows a lock takes (`FOR UPDATE OF m`). */
  readonly alias: Fragment;
  readonly decode: (rows: ReadonlyArray<unknown>) => Effect.Effect<ReadonlyArray<A>>;
}

export const relation = <S extends Schema.Decoder<unknown>>(definition: {
  readonly from: string;
  readonly alias: string;
  readonly columns: string;
  readonly row: S;
}): Relation<S["Type"]> => ({
  from: fixed(definition.from),
  columns: fixed(definition.columns),
  id: fixed(`${definition.alias}.id`),
  alias: fixed(definition.alias),
  decode: decodeRows(definition.row),
});

export type Lock = "update" | "update_skip_locked";

const lockClause = (sql: SqlClient.SqlClient, relation: Relation<unknown>, lock: Lock | undefined) =>
  lock === undefined
    ? sql``
    : lock === "update"
      ? sql`FOR UPDATE OF ${relation.alias}`
      : sql`FOR UPDATE OF ${relation.alias} SKIP LOCKED`;

/** The rows matching every condition, in `order` (default: none), locked when asked. */
export const selectRows = <A>(
  sql: SqlClient.SqlClient,
  relation: Relation<A>,
  where: ReadonlyArray<Fragment>,
  options: { readonly order?: Fragment; readonly limit?: number; readonly lock?: Lock } = {},
): Effect.Effect<ReadonlyArray<A>, SqlError.SqlError> =>
  Effect.flatMap(
    sql`SELECT ${relation.columns} FROM ${relation.from} WHERE ${sql.and(where)}
      ${options.order ? sql`ORDER BY ${options.order}` : sql``}
      ${options.limit !== undefined ? sql`LIMIT ${options.limit}` : sql``}
      ${lockClause(sql, relation, options.lock)}`,
    relation.decode,
  );

/**
 * The rows among `ids` still matching `where`, locked for update in id order (so two transactions
 * locking overlapping sets cannot deadlock); with `skipLocked`, rows another transaction holds are left
 * out. Inside a transaction.
 */
export const lockRows = <A>(
  sql: SqlClient.SqlClient,
  relation: Relation<A>,
  ids: ReadonlyArray<string>,
  where: ReadonlyArray<Fragment> = [],
  options: { readonly skipLocked?: boolean } = {},
): Effect.Effect<ReadonlyArray<A>, SqlError.SqlError> =>
  ids.length === 0
    ? Effect.succeed([])
    : selectRows(sql, relation, [sql`${relation.id} = ANY (${ids}::text[])`, ...where], {
        order: relation.id,
        lock: options.skipLocked ? "update_skip_locked" : "update",
      });

/** Stripe's cursor paging: newest first; `starting_after` pages on, `ending_before` pages back. */
export interface PageRequest {
  readonly limit?: number;
  readonly starting_after?: string;
  readonly ending_before?: string;
}

export interface Page<A> {
  readonly object: "list";
  readonly data: A[];
  readonly has_more: boolean;
}

export const DEFAULT_PAGE_LIMIT = 10;

/**
 * How a list is ordered: by id (the default), or by another key with the id as tie-break, in which case
 * a cursor's key is read from the row it names (`cursorKey`).
 */
export interface PageOrder {
  /** The key compared with the cursor's (a column, or a row of columns). */
  readonly key: Fragment;
  /** `ORDER BY` lists, newest first and oldest first (column by column, so an index serves them). */
  readonly newestFirst: Fragment;
  readonly oldestFirst: Fragment;
  readonly cursorKey: (sql: SqlClient.SqlClient, id: string) => Fragment;
}

/**
 * One page of the rows matching `where`, newest first. `has_more` says whether more lie beyond this page
 * in the direction of travel (older after `starting_after` or with no cursor, newer with `ending_before`).
 */
export const pageRows = <A>(
  sql: SqlClient.SqlClient,
  relation: Relation<A>,
  where: ReadonlyArray<Fragment>,
  request: PageRequest,
  order?: PageOrder,
): Effect.Effect<Page<A>, InvalidRequest | SqlError.SqlError> => {
  if (request.starting_after !== undefined && request.ending_before !== undefined)
    return Effect.fail(
      invalidParam("ending_before", "Give starting_after or ending_before, not both.", "parameter_conflict"),
    );
  const limit = request.limit ?? DEFAULT_PAGE_LIMIT;
  const key = order?.key ?? relation.id;
  const cursorOf = (id: string) => (order ? order.cursorKey(sql, id) : sql`${id}::text`);
  const backwards = request.ending_before !== undefined;
  const cursor =
    request.starting_after !== undefined
      ? [sql`${key} < ${cursorOf(request.starting_after)}`]
      : request.ending_before !== undefined
        ? [sql`${key} > ${cursorOf(request.ending_before)}`]
        : [];
  return Effect.map(
    selectRows(sql, relation, [...where, ...cursor], {
      order: backwards ? (order?.oldestFirst ?? sql`${key} ASC`) : (order?.newestFirst ?? sql`${key} DESC`),
      limit: limit + 1,
    }),
    (rows): Page<A> => {
      const data = rows.slice(0, limit);
      return { object: "list", data: backwards ? data.reverse() : data, has_more: rows.length > limit };
    },
  );
};

/** The page with each row rendered. */
export const renderPage = <A, B>(page: Page<A>, render: (row: A) => B): Page<B> => ({
  ...page,
  data: page.data.map(render),
});
