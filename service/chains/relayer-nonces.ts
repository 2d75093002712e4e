/**
 * The relayer's nonces: one Postgres sequence per chain and account (`billing.rnonce_<chain>_<address>`).
 * `nextval` neither blocks nor rolls back, so concurrent submissions (parallel charge batches) take
 * nonces without waiting for each other's transactions. A nonce taken by a transaction that rolled back
 * is a gap; the tracker fills it once no submission holds the account's shared lock (relayer-locks.ts).
 */
import { Effect, Schema } from "effect";
import type { SqlClient } from "effect/sql";
import { decodeRows } from "../db/rows.ts";

const decodeNonces = decodeRows(Schema.Struct({ nonce: Schema.Number }));
const decodeNames = decodeRows(Schema.Struct({ name: Schema.String }));

/** The nonce sequence's name; chain id and address are checked, so the name is safe to splice into DDL. */
const nonceSequence = (chainId: number, from: string) =>
  Number.isSafeInteger(chainId) && chainId >= 0 && /^0x[0-9a-f]{40}$/.test(from)
    ? Effect.succeed(`billing.rnonce_${chainId}_${from.slice(2)}`)
    : Effect.die(new Error(`no nonce sequence for chain ${chainId} and account ${from}`));

export const relayerNonces = (sql: SqlClient.SqlClient) => ({
  /** Creates the account's nonce sequence on the chain if missing, starting past every recorded nonce. */
  ensureNonceSequence: (chainId: number, from: string) =>
    sql.withTransaction(
      Effect.gen(function* () {
        yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`relayer:${chainId}:${from}`}))`;
        // Items share their carrier's nonce, so the carriers' highest is the account's (and the
        // partial index relayer_transactions_nonce holds it).
        const [highest] = yield* sql`SELECT coalesce(max(nonce) + 1, 0)::int AS nonce
          FROM billing.relayer_transactions
          WHERE chain_id = ${chainId} AND from_address = ${from} AND carrier_id IS NULL`.pipe(
          Effect.flatMap(decodeNonces),
        );
        const name = yield* nonceSequence(chainId, from);
        yield* sql.unsafe(
          `CREATE SEQUENCE IF NOT EXISTS ${name} MINVALUE 0 START WITH ${highest?.nonce ?? 0}`,
        );
      }),
    ),
  /**
   * The next nonce of the account on the chain, at least `atLeast` (the node's pending count: nonces
   * below it are used already, by us or by another holder of the key).
   */
  takeNonce: (chainId: number, from: string, atLeast: number) =>
    Effect.gen(function* () {
      const name = yield* nonceSequence(chainId, from);
      const [taken] = yield* sql`SELECT nextval(${name}::regclass)::int AS nonce`.pipe(
        Effect.flatMap(decodeNonces),
      );
      const nonce = taken?.nonce ?? 0;
      if (nonce >= atLeast) return nonce;
      // Skipped by taking values, never by setval: a concurrent nextval can never be handed out twice.
      const [skipped] = yield* sql`SELECT max(nextval(${name}::regclass))::int AS nonce
        FROM generate_series(1, ${atLeast - nonce})`.pipe(Effect.flatMap(decodeNonces));
      return skipped?.nonce ?? atLeast;
    }),
  /** Drops every account's nonce sequence on the chain (the local stack's crash recovery). */
  dropNonceSequences: (chainId: number) =>
    Effect.gen(function* () {
      const sequences = yield* sql`SELECT relname AS name FROM pg_class c
          JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'billing' AND c.relkind = 'S' AND starts_with(relname, ${`rnonce_${chainId}_`})`.pipe(
        Effect.flatMap(decodeNames),
      );
      for (const { name } of sequences) yield* sql.unsafe(`DROP SEQUENCE IF EXISTS billing.${name}`);
    }),
});
