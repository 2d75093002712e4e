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
 * - Attempts: an action that may need several transactions (a return, an authorization) names itself
 *   with `action`; a new attempt is sent only when none is pending or mined (see relayer-tracking.ts for
 *   what the tracker decides, and docs/mandates-and-charges.md).
 * - Budget: each chain's relayer spends at most `relayer_budget_wei_per_hour` (gas limit × max fee until
 *   mined, then gas used × price) over any hour; beyond it `submit` refuses with `budget_exhausted`.
 */
import { Context, Duration, Effect, Layer, Option, Redacted, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { type Hex, keccak256 } from "viem";
import { type PrivateKeyAccount, privateKeyToAccount } from "viem/accounts";
import { decodeRows } from "../db/rows.ts";
import { Unavailable } from "../errors.ts";
import { newId } from "../ids.ts";
import { ChainClients } from "./chain-clients.ts";
import { DEFAULT_RELAYER_BUDGET_WEI_PER_HOUR, type ResolvedChain } from "./config.ts";
import { ChainRegistry } from "./registry.ts";
import { decideTracking, nonceGaps } from "./relayer-tracking.ts";

export class RelayerError extends Schema.TaggedError<RelayerError>()("RelayerError", {
  reason: Schema.Literals([
    "no_relayer_key",
    "unknown_chain",
    "simulation_failed",
    "rpc_failed",
    "budget_exhausted",
  ]),
  message: Schema.String,
}) {}

/** What an API request answers when the relayer refused for the budget: 503, retry later. */
export const relayerBudgetExhausted = new Unavailable({
  code: "relayer_budget_exhausted",
  message:
    "This service's gas budget for the chain is spent for now, so nothing was sent or recorded. Retry later.",
});

const budgetRefusals = new Map<number, number>();
/**
 * Submissions this process refused because a chain's hourly budget was spent (for /metrics): on one
 * chain, or on all of them.
 */
export const relayerBudgetRefusals = (chainId?: number): number =>
  chainId === undefined
    ? [...budgetRefusals.values()].reduce((sum, n) => sum + n, 0)
    : (budgetRefusals.get(chainId) ?? 0);
/** The same counts by chain id. */
export const relayerBudgetRefusalsByChain = (): ReadonlyMap<number, number> => new Map(budgetRefusals);

/** The relayer's hourly spending limit on a chain, in wei. */
export const relayerBudget = (chain: ResolvedChain): bigint =>
  chain.relayer_budget_wei_per_hour === undefined
    ? DEFAULT_RELAYER_BUDGET_WEI_PER_HOUR
    : BigInt(chain.relayer_budget_wei_per_hour);

export interface RelayerSubmission {
  readonly to: Hex;
  readonly data: Hex;
  /** Names this transaction: submitting the same purpose again returns it. */
  readonly purpose: string;
  /**
   * The action this transaction is one attempt of: while an attempt is pending or mined, submitting
   * another purpose of the same action returns that attempt instead of sending a second one.
   */
  readonly action?: string;
}

export interface RelayedTransaction {
  readonly id: string;
  readonly chainId: number;
  readonly nonce: number;
  readonly hash: Hex;
  readonly hashes: readonly Hex[];
  readonly purpose: string;
  readonly action: string | null;
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
  action: Schema.NullOr(Schema.String),
  status: Schema.Literals(["pending", "mined", "reverted", "superseded"]),
  block_number: Schema.NullOr(Schema.BigInt),
  last_broadcast_at: Schema.Date,
});
type Row = typeof Row.Type;
const decodeTxRows = decodeRows(Row);
const COLUMNS = `id, chain_id, from_address, nonce, to_address, data, gas_limit::text, max_fee_per_gas::text,
  max_priority_fee_per_gas::text, hashes, raw, purpose, action, status, block_number, last_broadcast_at`;

const toRelayed = (row: Row): RelayedTransaction => ({
  id: row.id,
  chainId: Number(row.chain_id),
  nonce: Number(row.nonce),
  hash: row.hashes[row.hashes.length - 1] as Hex,
  hashes: row.hashes as Hex[],
  purpose: row.purpose,
  action: row.action,
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
      tx: RelayerSubmission,
    ) => Effect.Effect<RelayedTransaction, RelayerError | SqlError.SqlError>;
    readonly find: (
      chainId: number,
      purpose: string,
    ) => Effect.Effect<RelayedTransaction | undefined, SqlError.SqlError>;
    /** The newest attempt of an action. */
    readonly findAction: (
      chainId: number,
      action: string,
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

        const findAction = (chainId: number, action: string) =>
          sql
            .unsafe(
              `SELECT ${COLUMNS} FROM billing.relayer_transactions WHERE chain_id = $1 AND action = $2
               ORDER BY created_at DESC, id DESC LIMIT 1`,
              [chainId, action],
            )
            .pipe(
              Effect.flatMap(decodeTxRows),
              Effect.map((rows) => (rows[0] ? toRelayed(rows[0]) : undefined)),
            );

        /** The transaction that already answers a submission: its purpose, or a live attempt of its action. */
        const existing = (chainId: number, tx: RelayerSubmission) =>
          Effect.gen(function* () {
            const same = yield* find(chainId, tx.purpose);
            if (same || tx.action === undefined) return same;
            const latest = yield* findAction(chainId, tx.action);
            return latest && (latest.status === "pending" || latest.status === "mined") ? latest : undefined;
          });

        /** Wei spent (or, while pending, at most to be spent) by the account on a chain in the last hour. */
        const spentLastHour = (chainId: number, from: string) =>
          Effect.map(
            sql<{ spent: string }>`SELECT coalesce(sum(coalesce(spent_wei,
                CASE WHEN status = 'superseded' THEN 0 ELSE gas_limit * max_fee_per_gas END)), 0)::text AS spent
              FROM billing.relayer_transactions
              WHERE chain_id = ${chainId} AND from_address = ${from} AND created_at > now() - interval '1 hour'`,
            (rows) => BigInt(rows[0]?.spent ?? "0"),
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

        const submit = (chainId: number, tx: RelayerSubmission) =>
          Effect.gen(function* () {
            if (!account)
              return yield* new RelayerError({
                reason: "no_relayer_key",
                message: "RELAYER_PRIVATE_KEY is not set",
              });
            const chain = registry.byId(chainId);
            if (!chain)
              return yield* new RelayerError({ reason: "unknown_chain", message: `no chain ${chainId}` });
            const answered = yield* existing(chainId, tx);
            if (answered) return answered;
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
                const again = yield* existing(chainId, tx);
                if (again) return { row: undefined, existing: again };
                const gasLimit = (gas * 12n) / 10n;
                const cost = gasLimit * fees.maxFeePerGas;
                const budget = relayerBudget(chain);
                const spent = yield* spentLastHour(chainId, from);
                if (spent + cost > budget) {
                  budgetRefusals.set(chainId, (budgetRefusals.get(chainId) ?? 0) + 1);
                  yield* Effect.logWarning("relayer budget exhausted; transaction refused").pipe(
                    Effect.annotateLogs({
                      chain: chainId,
                      purpose: tx.purpose,
                      spent_wei: spent.toString(),
                      cost_wei: cost.toString(),
                      budget_wei_per_hour: budget.toString(),
                    }),
                  );
                  return yield* new RelayerError({
                    reason: "budget_exhausted",
                    message: `the relayer's hourly gas budget on chain ${chainId} is spent`,
                  });
                }
                const [recorded] = yield* sql<{ next: string | null }>`
                  SELECT (max(nonce) + 1)::text AS next FROM billing.relayer_transactions
                  WHERE chain_id = ${chainId} AND from_address = ${from}`;
                const onChain = yield* rpc("nonce", () =>
                  client.getTransactionCount({ address: account.address, blockTag: "pending" }),
                );
                const nonce = Math.max(onChain, Number(recorded?.next ?? 0));
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
                  action: tx.action ?? null,
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
                const { status, blockNumber, gasUsed, effectiveGasPrice } = receipt.value;
                yield* sql`UPDATE billing.relayer_transactions
                  SET status = ${status === "success" ? "mined" : "reverted"},
                      block_number = ${blockNumber}, mined_hash = ${hash},
                      spent_wei = ${(gasUsed * effectiveGasPrice).toString()}
                  WHERE id = ${row.id}`;
                return;
              }
            }
            const newest = row.hashes[row.hashes.length - 1] as Hex;
            // Asked before sending: re-sending bytes the node already holds only fills its log with
            // "already imported" (and, behind a nonce gap, did so every second forever).
            const known = yield* rpc("transaction", () =>
              client.request({ method: "eth_getTransactionByHash", params: [newest] }),
            ).pipe(
              Effect.map((tx) => tx !== null),
              Effect.option,
            );
            const decision = decideTracking({
              nonce: Number(row.nonce),
              receipt: undefined,
              minedNonce: Option.getOrUndefined(mined),
              nodeHasTransaction: Option.getOrUndefined(known),
              ageMs: Date.now() - row.last_broadcast_at.getTime(),
              bumpAfterMs: Duration.toMillis(Duration.fromInputUnsafe(options.bumpAfter)),
            });
            if (decision.kind === "wait" || decision.kind === "record") return;
            if (decision.kind === "superseded") {
              yield* sql`UPDATE billing.relayer_transactions SET status = 'superseded' WHERE id = ${row.id}`;
              return;
            }
            if (decision.kind === "rebroadcast") {
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

        /**
         * Fills the nonces below our pending transactions that nothing of ours will fill (the chain lost
         * the blocks that had them) with empty self-transfers, so the queued transactions can be mined.
         * Under the nonce lock, so no submission allocates a nonce meanwhile.
         */
        const fillNonceGaps = (chain: ResolvedChain, signer: PrivateKeyAccount) =>
          sql
            .withTransaction(
              Effect.gen(function* () {
                const from = signer.address.toLowerCase();
                yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`relayer:${chain.id}:${from}`}))`;
                const pending = yield* sql<{ nonce: string }>`SELECT nonce::text AS nonce
                FROM billing.relayer_transactions
                WHERE chain_id = ${chain.id} AND from_address = ${from} AND status = 'pending'`;
                if (pending.length === 0) return;
                const client = clientFor(chain);
                const pool = yield* rpc("nonce", () =>
                  client.getTransactionCount({ address: signer.address, blockTag: "pending" }),
                );
                const gaps = nonceGaps(
                  pool,
                  pending.map((row) => Number(row.nonce)),
                );
                if (gaps.length === 0) return;
                const fees = yield* rpc("fees", () => client.estimateFeesPerGas());
                for (const nonce of gaps) {
                  const raw = yield* sign(chain, signer, {
                    to: signer.address,
                    data: "0x",
                    nonce,
                    gas: 21_000n,
                    maxFeePerGas: fees.maxFeePerGas,
                    maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
                  });
                  yield* broadcast(chain, raw);
                }
                yield* Effect.logWarning("filled a nonce gap left by lost blocks").pipe(
                  Effect.annotateLogs({ chain: chain.id, nonces: gaps.join(",") }),
                );
              }),
            )
            .pipe(
              Effect.catchTag("RelayerError", (error) =>
                Effect.logWarning("nonce gap check failed", error.message),
              ),
            );

        const track = Effect.gen(function* () {
          if (!account) return;
          const chains = yield* sql<{ chain_id: string }>`SELECT DISTINCT chain_id::text AS chain_id
            FROM billing.relayer_transactions
            WHERE status = 'pending' AND from_address = ${account.address.toLowerCase()}`;
          for (const { chain_id } of chains) {
            const chain = registry.byId(Number(chain_id));
            if (chain) yield* fillNonceGaps(chain, account);
          }
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

        return { address: account?.address, submit, find, findAction, track, waitMined };
      }),
    );
}

/** Tracks the relayer's pending transactions every second. */
export const relayerTracker = {
  name: "relayer-tracker",
  pass: Effect.flatMap(Effect.service(Relayer), (relayer) => relayer.track),
  interval: "1 second",
} as const;
