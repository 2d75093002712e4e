/**
 * The relayer: the service's own account, which pays the gas of every escrow transaction.
 *
 * - No double submission: a transaction is identified by its purpose (e.g. the charge it makes);
 *   submitting the same purpose again, from any process or after a restart, returns the first one.
 * - Nonces: allocated under a per-chain advisory lock, from the larger of the chain's pending count and
 *   our own records, so replicas never reuse one.
 * - Durability: the signed transaction is committed before it is broadcast; a crash between the two is
 *   healed by the tracker, which re-broadcasts the same bytes.
 * - Stuck transactions: the tracker replaces a transaction unmined after `bumpAfter` with the same nonce
 *   and fees raised by at least 12.5% (nodes require 10%), keeping every hash it ever broadcast.
 */
import { Context, Duration, Effect, Layer, Option, Redacted, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { type Hex, keccak256 } from "viem";
import { type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { decodeRows } from "../db/rows.ts";
import { newId } from "../ids.ts";
import { ChainClients } from "./chain-clients.ts";
import type { ResolvedChain } from "./config.ts";
import { ChainRegistry } from "./registry.ts";

export class RelayerError extends Schema.TaggedError<RelayerError>()("RelayerError", {
  reason: Schema.Literals(["no_relayer_key", "unknown_chain", "simulation_failed", "rpc_failed"]),
  message: Schema.String,
}) {}

export interface RelayedTransaction {
  readonly id: string;
  readonly chainId: number;
  readonly nonce: number;
  readonly hash: Hex;
  readonly hashes: readonly Hex[];
  readonly purpose: string;
  readonly status: "pending" | "mined" | "reverted" | "superseded";
  readonly blockNumber: number | null;
}

const Row = Schema.Struct({
  id: Schema.String,
  chain_id: Schema.BigInt,
  from_address: Schema.String,
  nonce: Schema.BigInt,
  to_address: Schema.String,
  data: Schema.String,
  gas_limit: Schema.String,
  max_fee_per_gas: Schema.String,
  max_priority_fee_per_gas: Schema.String,
  hashes: Schema.Array(Schema.String),
  raw: Schema.String,
  purpose: Schema.String,
  status: Schema.Literals(["pending", "mined", "reverted", "superseded"]),
  block_number: Schema.NullOr(Schema.BigInt),
  last_broadcast_at: Schema.Date,
});
type Row = typeof Row.Type;
const decodeTxRows = decodeRows(Row);
const COLUMNS = `id, chain_id, from_address, nonce, to_address, data, gas_limit::text, max_fee_per_gas::text,
  max_priority_fee_per_gas::text, hashes, raw, purpose, status, block_number, last_broadcast_at`;

const toRelayed = (row: Row): RelayedTransaction => ({
  id: row.id,
  chainId: Number(row.chain_id),
  nonce: Number(row.nonce),
  hash: row.hashes[row.hashes.length - 1] as Hex,
  hashes: row.hashes as Hex[],
  purpose: row.purpose,
  status: row.status,
  blockNumber: row.block_number === null ? null : Number(row.block_number),
});

/** A nodes' answer that means the bytes are already in its pool or already mined: not an error. */
const isBenignBroadcastError = (error: unknown) =>
  /already known|known transaction|nonce too low|already imported|transaction already exists/i.test(
    String(error),
  );

export interface RelayerOptions {
  readonly key: Redacted.Redacted<Hex> | undefined;
  /** Replace a transaction still unmined after this long. */
  readonly bumpAfter: Duration.Input;
}

export class Relayer extends Context.Service<
  Relayer,
  {
    readonly address: Hex | undefined;
    readonly submit: (
      chainId: number,
      tx: { readonly to: Hex; readonly data: Hex; readonly purpose: string },
    ) => Effect.Effect<RelayedTransaction, RelayerError | SqlError.SqlError>;
    readonly find: (
      chainId: number,
      purpose: string,
    ) => Effect.Effect<RelayedTransaction | undefined, SqlError.SqlError>;
    /** Waits for a receipt of any of the purpose's transactions; undefined after the timeout. */
    readonly waitMined: (
      chainId: number,
      purpose: string,
      timeout: Duration.Input,
    ) => Effect.Effect<
      { readonly hash: Hex; readonly status: "mined" | "reverted"; readonly blockNumber: number } | undefined,
      SqlError.SqlError
    >;
    /** One tracking pass: record receipts, re-broadcast, replace stuck transactions. */
    readonly track: Effect.Effect<void, SqlError.SqlError>;
  }
>()("Relayer") {
  static readonly layer = (options: RelayerOptions) =>
    Layer.effect(
      Relayer,
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient;
        const registry = yield* ChainRegistry;
        const account: PrivateKeyAccount | undefined = options.key
          ? privateKeyToAccount(Redacted.value(options.key))
          : undefined;
        const clients = yield* ChainClients;
        const clientFor = clients.client;
        const rpc = <A>(what: string, f: () => Promise<A>) =>
          Effect.tryPromise({
            try: f,
            catch: (error) =>
              new RelayerError({ reason: "rpc_failed", message: `${what}: ${String(error).split("\n")[0]}` }),
          });

        const find = (chainId: number, purpose: string) =>
          sql
            .unsafe(
              `SELECT ${COLUMNS} FROM billing.relayer_transactions WHERE chain_id = $1 AND purpose = $2`,
              [chainId, purpose],
            )
            .pipe(
              Effect.flatMap(decodeTxRows),
              Effect.map((rows) => (rows[0] ? toRelayed(rows[0]) : undefined)),
            );

        const sign = (
          chain: ResolvedChain,
          signer: PrivateKeyAccount,
          tx: {
            to: Hex;
            data: Hex;
            nonce: number;
            gas: bigint;
            maxFeePerGas: bigint;
            maxPriorityFeePerGas: bigint;
          },
        ) =>
          Effect.promise(() =>
            signer.signTransaction({
              type: "eip1559",
              chainId: chain.id,
              nonce: tx.nonce,
              to: tx.to,
              data: tx.data,
              gas: tx.gas,
              maxFeePerGas: tx.maxFeePerGas,
              maxPriorityFeePerGas: tx.maxPriorityFeePerGas,
            }),
          );

        const broadcast = (chain: ResolvedChain, raw: Hex) =>
          rpc("eth_sendRawTransaction", () =>
            clientFor(chain).sendRawTransaction({ serializedTransaction: raw }),
          ).pipe(
            Effect.asVoid,
            Effect.catchIf(
              (error) => isBenignBroadcastError(error.message),
              () => Effect.void,
            ),
            // A node that is down now gets the same bytes again on the next tracking pass.
            Effect.catch((error) => Effect.logWarning("broadcast failed; will retry", error.message)),
          );

        const submit = (
          chainId: number,
          tx: { readonly to: Hex; readonly data: Hex; readonly purpose: string },
        ) =>
          Effect.gen(function* () {
            if (!account)
              return yield* new RelayerError({
                reason: "no_relayer_key",
                message: "RELAYER_PRIVATE_KEY is not set",
              });
            const chain = registry.byId(chainId);
            if (!chain)
              return yield* new RelayerError({ reason: "unknown_chain", message: `no chain ${chainId}` });
            const existing = yield* find(chainId, tx.purpose);
            if (existing) return existing;
            const client = clientFor(chain);
            const gas = yield* Effect.tryPromise({
              try: () => client.estimateGas({ account: account.address, to: tx.to, data: tx.data }),
              catch: (error) =>
                new RelayerError({
                  reason: "simulation_failed",
                  message: String(error).split("\n")[0] ?? "reverted",
                }),
            });
            const fees = yield* rpc("fees", () => client.estimateFeesPerGas());
            const from = account.address.toLowerCase();
            const row = yield* sql.withTransaction(
              Effect.gen(function* () {
                yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`relayer:${chainId}:${from}`}))`;
                const again = yield* find(chainId, tx.purpose);
                if (again) return { row: undefined, existing: again };
                const [recorded] = yield* sql<{ next: string | null }>`
                  SELECT (max(nonce) + 1)::text AS next FROM billing.relayer_transactions
                  WHERE chain_id = ${chainId} AND from_address = ${from}`;
                const onChain = yield* rpc("nonce", () =>
                  client.getTransactionCount({ address: account.address, blockTag: "pending" }),
                );
                const nonce = Math.max(onChain, Number(recorded?.next ?? 0));
                const gasLimit = (gas * 12n) / 10n;
                const raw = yield* sign(chain, account, {
                  to: tx.to,
                  data: tx.data,
                  nonce,
                  gas: gasLimit,
                  maxFeePerGas: fees.maxFeePerGas,
                  maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
                });
                const id = yield* newId("relayerTransaction");
                const rows = yield* sql`INSERT INTO billing.relayer_transactions ${sql.insert({
                  id,
                  chain_id: chainId,
                  from_address: from,
                  nonce,
                  to_address: tx.to.toLowerCase(),
                  data: tx.data,
                  gas_limit: gasLimit.toString(),
                  max_fee_per_gas: fees.maxFeePerGas.toString(),
                  max_priority_fee_per_gas: fees.maxPriorityFeePerGas.toString(),
                  hashes: [keccak256(raw)],
                  raw,
                  purpose: tx.purpose,
                  status: "pending",
                })} RETURNING ${sql.literal(COLUMNS)}`.pipe(Effect.flatMap(decodeTxRows));
                const inserted = rows[0];
                if (!inserted) return yield* Effect.die(new Error("relayer insert returned nothing"));
                // Inside a caller's transaction the bytes go out once it commits, never for a rollback.
                yield* sql.afterCommit(broadcast(chain, inserted.raw as Hex));
                return { row: inserted, existing: undefined };
              }),
            );
            if (row.existing) return row.existing;
            return toRelayed(row.row);
          });

        const trackOne = (row: Row) =>
          Effect.gen(function* () {
            const chain = registry.byId(row.chain_id);
            if (!chain || !account) return;
            const client = clientFor(chain);
            // The nonce is read before the receipts: a transaction of ours mined in between then shows
            // its receipt below instead of passing for one that another transaction superseded.
            const mined = yield* rpc("nonce", () =>
              client.getTransactionCount({ address: account.address }),
            ).pipe(Effect.option);
            for (const hash of row.hashes) {
              const receipt = yield* rpc("receipt", () =>
                client.getTransactionReceipt({ hash: hash as Hex }),
              ).pipe(Effect.option);
              if (Option.isSome(receipt)) {
                yield* sql`UPDATE billing.relayer_transactions
                  SET status = ${receipt.value.status === "success" ? "mined" : "reverted"},
                      block_number = ${receipt.value.blockNumber}, mined_hash = ${hash}
                  WHERE id = ${row.id}`;
                return;
              }
            }
            if (Option.isSome(mined) && mined.value > Number(row.nonce)) {
              // Our nonce was used by a transaction we never broadcast: this one can no longer be mined.
              yield* sql`UPDATE billing.relayer_transactions SET status = 'superseded' WHERE id = ${row.id}`;
              return;
            }
            const age = Date.now() - row.last_broadcast_at.getTime();
            if (age < Duration.toMillis(Duration.fromInputUnsafe(options.bumpAfter))) {
              yield* broadcast(chain, row.raw as Hex);
              return;
            }
            const current = yield* rpc("fees", () => client.estimateFeesPerGas()).pipe(Effect.option);
            const larger = (a: bigint, b: bigint) => (a > b ? a : b);
            const bump = (old: bigint, now: bigint | undefined) =>
              larger((old * 1125n) / 1000n + 1n, now ?? 0n);
            const maxPriorityFeePerGas = bump(
              BigInt(row.max_priority_fee_per_gas),
              Option.getOrUndefined(current)?.maxPriorityFeePerGas,
            );
            const maxFeePerGas = bump(
              BigInt(row.max_fee_per_gas),
              Option.getOrUndefined(current)?.maxFeePerGas,
            );
            const raw = yield* sign(chain, account, {
              to: row.to_address as Hex,
              data: row.data as Hex,
              nonce: Number(row.nonce),
              gas: BigInt(row.gas_limit),
              maxFeePerGas: larger(maxFeePerGas, maxPriorityFeePerGas),
              maxPriorityFeePerGas,
            });
            yield* sql`UPDATE billing.relayer_transactions
              SET raw = ${raw}, hashes = array_append(hashes, ${keccak256(raw)}),
                  max_fee_per_gas = ${maxFeePerGas.toString()}, max_priority_fee_per_gas = ${maxPriorityFeePerGas.toString()},
                  last_broadcast_at = now()
              WHERE id = ${row.id}`;
            yield* Effect.logInfo("replaced a stuck transaction with higher fees").pipe(
              Effect.annotateLogs({ chain: chain.id, nonce: Number(row.nonce), purpose: row.purpose }),
            );
            yield* broadcast(chain, raw);
          });

        const track = Effect.gen(function* () {
          if (!account) return;
          // Each pending transaction is tracked by one process at a time (SKIP LOCKED).
          const pending = yield* sql
            .unsafe(
              `SELECT id FROM billing.relayer_transactions WHERE status = 'pending' AND from_address = $1 ORDER BY chain_id, nonce`,
              [account.address.toLowerCase()],
            )
            .pipe(Effect.map((rows) => rows.map((r) => String((r as { id: string }).id))));
          for (const id of pending) {
            yield* sql.withTransaction(
              Effect.gen(function* () {
                const rows = yield* sql
                  .unsafe(
                    `SELECT ${COLUMNS} FROM billing.relayer_transactions WHERE id = $1 AND status = 'pending' FOR UPDATE SKIP LOCKED`,
                    [id],
                  )
                  .pipe(Effect.flatMap(decodeTxRows));
                if (rows[0]) yield* trackOne(rows[0]);
              }),
            );
          }
        });

        const waitMined = (chainId: number, purpose: string, timeout: Duration.Input) =>
          Effect.gen(function* () {
            const chain = registry.byId(chainId);
            if (!chain) return undefined;
            const client = clientFor(chain);
            for (;;) {
              const tx = yield* find(chainId, purpose);
              for (const hash of tx?.hashes ?? []) {
                const receipt = yield* rpc("receipt", () => client.getTransactionReceipt({ hash })).pipe(
                  Effect.option,
                );
                if (Option.isSome(receipt))
                  return {
                    hash,
                    status: receipt.value.status === "success" ? ("mined" as const) : ("reverted" as const),
                    blockNumber: Number(receipt.value.blockNumber),
                  };
              }
              yield* Effect.sleep("100 millis");
            }
          }).pipe(Effect.timeoutOption(timeout), Effect.map(Option.getOrUndefined));

        return { address: account?.address, submit, find, track, waitMined };
      }),
    );
}

/** Tracks the relayer's pending transactions every second. */
export const relayerTracker = {
  name: "relayer-tracker",
  pass: Effect.flatMap(Effect.service(Relayer), (relayer) => relayer.track),
  interval: "1 second",
} as const;
