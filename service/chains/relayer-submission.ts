/**
 * The steps every relayer transaction goes through, lone or carrying a group: gas measured (an
 * access-list run, or `eth_estimateGas` where the node refuses it: gas-measure.ts), what is read before
 * the database transaction (the fees within the chain's ceiling, the node's pending count, the balance
 * against its floor), then inside it the checks of the merchants' shares and of the budget, the nonce,
 * the signature and the row. The bytes go out once the caller's transaction commits, never for a
 * rollback; bytes the base fee outprices are recorded and held back until it falls (the tracker sends
 * them).
 */
import { Effect } from "effect";
import { SqlClient } from "effect/sql";
import type { Hex } from "viem";
import { outsideTransaction } from "../db/client.ts";
import { recordMetric } from "../metrics/metrics.ts";
import { ChainClients } from "./chain-clients.ts";
import type { ResolvedChain } from "./config.ts";
import { gasLimitForUsed } from "./gas-measure.ts";
import { ChainRegistry } from "./registry.ts";
import { RelayerAccount, RelayerError } from "./relayer-account.ts";
import { RelayerBalances } from "./relayer-balance.ts";
import { requireBudget } from "./relayer-budget.ts";
import { type Fees, RelayerFees } from "./relayer-fees.ts";
import { merchantWeights, requireMerchantShares } from "./relayer-shares.ts";
import { RelayerStore, type TransactionRow } from "./relayer-store.ts";

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
  /**
   * Gas the caller's own run of exactly this call used (`ChainClients.measureEscrow`), so the relayer
   * does not run it again; without it the relayer measures.
   */
  readonly gasUsed?: bigint;
  /**
   * The merchant of each object the transaction carries (one entry per object: a batch of three charges
   * of one merchant names it three times). Each merchant's part of the cost counts against its share of
   * the hourly budget (relayer-shares.ts); without it, the transaction counts against the chain's only.
   */
  readonly merchants?: ReadonlyArray<string>;
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

export const toRelayed = (row: TransactionRow): RelayedTransaction => ({
  id: row.id,
  chainId: row.chain_id,
  nonce: row.nonce,
  hash: row.hashes[row.hashes.length - 1] as Hex,
  hashes: row.hashes as Hex[],
  purpose: row.purpose,
  action: row.action,
  status: row.status,
  blockNumber: row.block_number === null ? null : Number(row.block_number),
});

/**
 * Whether what `byPurposeOrAction` found answers a submission with `purpose`: the transaction with that
 * purpose, whatever its status, or a pending or mined attempt of the same action.
 */
export const answering = (
  row: TransactionRow | undefined,
  purpose: string,
): RelayedTransaction | undefined =>
  row !== undefined && (row.purpose === purpose || row.status === "pending" || row.status === "mined")
    ? toRelayed(row)
    : undefined;

export const noRelayerKey = () =>
  new RelayerError({
    reason: "no_relayer_key",
    message: "no relayer key for this chain (RELAYER_PRIVATE_KEY, or the chain's relayer block)",
  });

/** What a transaction needs read before its database transaction. */
export interface Prepared {
  readonly fees: Fees;
  /** The base fee is above the capped fee: record the bytes, send them once it falls. */
  readonly waits: boolean;
  readonly nodePending: number;
}

export const makeSubmissionSteps = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const registry = yield* ChainRegistry;
  const clients = yield* ChainClients;
  const account = yield* RelayerAccount;
  const store = yield* RelayerStore;
  const fees = yield* RelayerFees;
  const balances = yield* RelayerBalances;

  // Each chain's nonce sequence exists before the first submission (created outside any caller's
  // transaction); a chain seen later gets its own on first use.
  const sequences = new Set<number>();
  const ensureNonces = (chainId: number, from: string) =>
    sequences.has(chainId)
      ? Effect.void
      : outsideTransaction(store.ensureNonceSequence(chainId, from)).pipe(
          Effect.provideService(SqlClient.SqlClient, sql),
          Effect.tap(() => Effect.sync(() => sequences.add(chainId))),
        );
  for (const chain of registry.all) {
    const from = account.from(chain.id);
    if (from !== undefined) yield* ensureNonces(chain.id, from);
  }

  /** Gas a call uses; a call that would revert fails here, so it is never recorded or sent. */
  const measure = (chain: ResolvedChain, address: Hex, to: Hex, data: Hex) =>
    clients.measureCall(chain, { from: address, to, data, at: "pending" }).pipe(
      Effect.mapError(
        (error) =>
          new RelayerError({
            reason: "simulation_failed",
            message: error.message.replace(/^gas: /, "") || "reverted",
          }),
      ),
    );

  /** Read before the database transaction that sends: the balance's floor, the fees, the node's count. */
  const prepare = (chain: ResolvedChain, address: Hex, from: string, purpose: string) =>
    Effect.gen(function* () {
      yield* balances.requireAboveFloor(chain, purpose);
      const { fees: bounded, waits } = yield* fees.forNew(chain);
      const nodePending = yield* account.rpc("nonce", () =>
        clients.client(chain).getTransactionCount({ address, blockTag: "pending" }),
      );
      yield* ensureNonces(chain.id, from);
      return { fees: bounded, waits, nodePending } satisfies Prepared;
    });

  /**
   * Inside the sending transaction: the checks of the merchants' shares and of the hourly budget, the
   * nonce, the signature and the row; the bytes go out once the transaction commits (unless held for the
   * fee ceiling).
   */
  const signAndRecord = (
    chain: ResolvedChain,
    from: string,
    prepared: Prepared,
    gas: bigint,
    tx: RelayerSubmission,
  ) =>
    Effect.gen(function* () {
      const gasLimit = gasLimitForUsed(gas);
      const { fees: offered, waits, nodePending } = prepared;
      const cost = gasLimit * offered.maxFeePerGas;
      const merchants = merchantWeights(tx.merchants ?? []);
      yield* requireMerchantShares(store, chain, from, cost, merchants, tx.purpose);
      yield* requireBudget(store, chain, from, cost, tx.purpose);
      const nonce = yield* store.takeNonce(chain.id, from, nodePending);
      const signed = yield* account.sign(chain, {
        to: tx.to,
        data: tx.data,
        nonce,
        gas: gasLimit,
        ...offered,
      });
      const row = yield* store.insert({
        chainId: chain.id,
        from,
        nonce,
        to: tx.to,
        data: tx.data,
        gasLimit,
        ...offered,
        hash: signed.hash,
        raw: signed.raw,
        purpose: tx.purpose,
        action: tx.action ?? null,
        heldForFees: waits,
        merchants,
      });
      if (!waits) yield* sql.afterCommit(account.broadcast(chain, signed.raw));
      else {
        yield* recordMetric((m) => m.relayerFeeCeilingHolds.inc({ chain_id: String(chain.id) }));
        yield* Effect.logWarning(
          "relayer transaction waits: the chain's base fee is above its fee cap (gas.max_fee_per_gas_wei)",
        ).pipe(
          Effect.annotateLogs({
            chain: chain.id,
            nonce,
            purpose: tx.purpose,
            max_fee_per_gas: offered.maxFeePerGas.toString(),
          }),
        );
      }
      return row;
    });

  return { measure, prepare, signAndRecord };
});
