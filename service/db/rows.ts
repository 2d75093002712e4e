import { Effect, Schema } from "effect";

/**
 * Decodes query result rows with a schema. A row that does not match its schema is a bug in our
 * own SQL, not a caller's mistake, so it becomes a defect (logged, answered as 500 api_error).
 */
export const decodeRows =
  <S extends Schema.Decoder<unknown>>(schema: S) =>
  (rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<S["Type"]>> =>
    Schema.decodeUnknownEffect(Schema.Array(schema))(rows).pipe(Effect.orDie) as Effect.Effect<
      ReadonlyArray<S["Type"]>
    >;
