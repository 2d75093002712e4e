/** Merchants: the accounts API keys, chains and every object belong to. The one writer of billing.merchants. */
import { Context, Effect, Layer, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { decodeRows } from "../db/rows.ts";
import { InvalidRequest } from "../errors.ts";
import { newId } from "../ids.ts";

const MerchantRow = Schema.Struct({ id: Schema.String, name: Schema.String, created_at: Schema.Date });
export type Merchant = typeof MerchantRow.Type;
const decodeMerchants = decodeRows(MerchantRow);
/** Merchants `byId` keeps in memory at most. */
const KNOWN_MERCHANTS_MAX = 10_000;

export class Merchants extends Context.Service<
  Merchants,
  {
    readonly create: (name: string) => Effect.Effect<Merchant, InvalidRequest | SqlError.SqlError>;
    readonly list: Effect.Effect<readonly Merchant[], SqlError.SqlError>;
    /** A merchant our own records name (a mandate's, say); undefined if there is none. */
    readonly byId: (id: string) => Effect.Effect<Merchant | undefined, SqlError.SqlError>;
  }
>()("Merchants") {
  static readonly layer = Layer.effect(
    Merchants,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const create = (name: string) =>
        Effect.gen(function* () {
          const trimmed = name.trim();
          if (trimmed.length < 1 || trimmed.length > 200)
            return yield* new InvalidRequest({
              code: "parameter_invalid",
              message: "name must be 1-200 characters",
              param: "name",
            });
          const id = yield* newId("merchant");
          const rows =
            yield* sql`INSERT INTO billing.merchants ${sql.insert({ id, name: trimmed })} RETURNING id, name, created_at`;
          const [merchant] = yield* decodeMerchants(rows);
          return merchant as Merchant;
        });
      const list = sql`SELECT id, name, created_at FROM billing.merchants ORDER BY id`.pipe(
        Effect.flatMap(decodeMerchants),
      );
      // A merchant's row never changes once created (nothing updates or deletes it), so a row read once
      // is kept: the hosted pages name the merchant on every request. Bounded by clearing when full.
      const known = new Map<string, Merchant>();
      const byId = (id: string) => {
        const cached = known.get(id);
        if (cached !== undefined) return Effect.succeed<Merchant | undefined>(cached);
        return sql`SELECT id, name, created_at FROM billing.merchants WHERE id = ${id}`.pipe(
          Effect.flatMap(decodeMerchants),
          Effect.map((rows) => {
            const [row] = rows;
            if (row !== undefined) {
              if (known.size >= KNOWN_MERCHANTS_MAX) known.clear();
              known.set(id, row);
            }
            return row;
          }),
        );
      };
      return { create, list, byId };
    }),
  );
}
