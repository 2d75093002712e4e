import { Effect, Schema } from "effect";
import { compileConforms } from "../compiled-schema.ts";

/**
 * Decodes query result rows with a schema. A row that does not match its schema is a bug in our
 * own SQL, not a caller's mistake, so it becomes a defect (logged, answered as 500 api_error).
 */
export const decodeRows = <S extends Schema.Decoder<unknown>>(schema: S) => {
  // Built once per schema: building the array schema and its decoder per call cost more than decoding.
  // Rows Schema would copy as they are skip its parser; it answers the rest (and every refusal).
  const rowsSchema = Schema.Array(schema);
  const decode = Schema.decodeUnknownEffect(rowsSchema);
  const conforms = compileConforms(rowsSchema, { keyOrder: false });
  return (rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<S["Type"]>> =>
    (conforms?.(rows) ? Effect.succeed(rows) : decode(rows).pipe(Effect.orDie)) as Effect.Effect<
      ReadonlyArray<S["Type"]>
    >;
};

/** The first row, or the caller's not-found error when there is none. */
export const firstOr =
  <E>(missing: () => E) =>
  <A>(rows: ReadonlyArray<A>): Effect.Effect<A, E> =>
    rows[0] !== undefined ? Effect.succeed(rows[0]) : Effect.fail(missing());

/** A row our own code knows exists (reloading what it just wrote or locked): its absence is a defect. */
export const theRow =
  (what: string) =>
  <A>(rows: ReadonlyArray<A>): Effect.Effect<A> =>
    rows[0] !== undefined ? Effect.succeed(rows[0]) : Effect.die(new Error(`${what} vanished`));
