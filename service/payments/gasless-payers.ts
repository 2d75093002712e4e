/**
 * The pay page's bounds per payer, across payments: the one writer of `billing.gasless_transfers`, a row
 * per gasless transfer (and per wallet deployment for one) the relayer sent, written with the relayer's
 * transaction of the same purpose, whose status says what became of it.
 *
 * Each authorization is checked alone (gasless-payments.ts), so without these a payer holding B could
 * sign N authorizations of B for N payment links in one block: all would pass, the relayer would send N
 * and N−1 would revert at its expense (all N after one front-running transfer of the payer's own).
 * - **One in flight per payer and token.** While a gasless transfer by the payer in the token is pending
 *   on the chain, another is refused (429 `authorization_in_flight`, `Retry-After`). The decision is made
 *   under an advisory lock on chain, token and payer, taken in the database transaction that records the
 *   relayer's transaction, so two processes never both admit one; the relayer's own simulation of the
 *   call then runs under that lock, at the pending block.
 * - **The balance reserved.** The balance check before anything is simulated counts the payer's
 *   balance less what its pending transfers in the token move.
 * - **A cooling-off after a revert.** A payer whose relayed transfer or wallet deployment reverted is
 *   refused gasless transfers on the chain (429 `payer_cooling_off`) until the chain's
 *   `gasless_cooling_off_seconds` (default an hour) of chain time have passed since the block that
 *   reverted. So a payer makes the relayer pay for at most one reverted transaction per cooling-off.
 * Refusals are counted in `billing_gasless_refusals_total` by reason.
 */
import { Clock, Context, Effect, Layer, Schema } from "effect";
import { SqlClient } from "effect/sql";
import type { Hex } from "viem";
import { DEFAULT_GASLESS_COOLING_OFF_SECONDS, type ResolvedChain } from "../chains/config.ts";
import { decodeRows } from "../db/rows.ts";
import { RateLimited } from "../errors.ts";
import { recordMetric } from "../metrics/metrics.ts";

/** When a payer whose transfer is still pending is told to try again: a block or a few. */
export const IN_FLIGHT_RETRY_SECONDS = 5;

/** The chain's cooling-off after a payer's reverted transaction, in chain seconds. */
export const coolingOffSeconds = (chain: ResolvedChain): number =>
  chain.gasless_cooling_off_seconds ?? DEFAULT_GASLESS_COOLING_OFF_SECONDS;

/** Chain seconds of cooling-off left at `now` after a revert in a block of time `revertedAt` (0: none). */
export const coolingOffLeft = (revertedAt: number | undefined, cooling: number, now: number): number =>
  revertedAt === undefined ? 0 : Math.max(0, revertedAt + cooling - now);

/** What of the payer's balance its pending transfers do not move already (never below zero). */
export const unreserved = (balance: bigint, reserved: bigint): bigint =>
  balance > reserved ? balance - reserved : 0n;

/** What the payer has on the chain now: transfers in the token pending, what they move, its last revert. */
export interface PayerStanding {
  readonly pending: number;
  /** The value of the payer's pending gasless transfers in the token. */
  readonly reserved: bigint;
  /** The newest block in which a transfer or wallet deployment of the payer (any token) reverted. */
  readonly revertedBlock: bigint | null;
}

const decodeStanding = decodeRows(
  Schema.Struct({
    pending: Schema.Number,
    reserved: Schema.BigIntFromString,
    reverted_block: Schema.NullOr(Schema.BigIntFromString),
  }),
);

export interface GaslessTransfer {
  readonly chainId: number;
  readonly purpose: string;
  readonly kind: "transfer" | "wallet_deployment";
  readonly token: Hex;
  readonly payer: Hex;
  readonly value: bigint;
  readonly paymentId: string;
}

const make = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;

  /** In flight: a pending transaction of the payer's in the token, for another payment. */
  const inFlight = (token: Hex, paymentId: string) =>
    sql`r.status = 'pending' AND g.token_address = ${token.toLowerCase()} AND g.payment_id <> ${paymentId}`;

  /** Holds the payer's lock on the chain and token until the caller's transaction ends. */
  const lock = (chainId: number, token: Hex, payer: Hex) =>
    Effect.asVoid(
      sql`SELECT pg_advisory_xact_lock(hashtext(${`gasless-payer:${chainId}:${token.toLowerCase()}:${payer.toLowerCase()}`}))`,
    );

  /**
   * The payer's standing on the chain for a transfer in `token` to `paymentId`: the payment's own attempts
   * are not counted as in flight or reserved (the relayer answers a second one with the first).
   */
  const standing = (chainId: number, token: Hex, payer: Hex, paymentId: string) =>
    sql`SELECT (count(*) FILTER (WHERE ${inFlight(token, paymentId)}))::int AS pending,
        coalesce(sum(g.value) FILTER (WHERE ${inFlight(token, paymentId)}), 0)::text AS reserved,
        (max(r.block_number) FILTER (WHERE r.status = 'reverted'))::text AS reverted_block
      FROM billing.gasless_transfers g
      JOIN billing.relayer_transactions r ON r.chain_id = g.chain_id AND r.purpose = g.purpose
      WHERE g.chain_id = ${chainId} AND g.payer_address = ${payer.toLowerCase()}`.pipe(
      Effect.flatMap(decodeStanding),
      Effect.map(
        ([row]): PayerStanding => ({
          pending: row?.pending ?? 0,
          reserved: row?.reserved ?? 0n,
          revertedBlock: row?.reverted_block ?? null,
        }),
      ),
    );

  const refused = (chain: ResolvedChain, reason: "in_flight" | "cooling_off" | "reserved") =>
    recordMetric((m) => m.gaslessRefusals.inc({ chain_id: String(chain.id), reason }));

  /**
   * 429 while the payer cools off after a revert (chain time `now`); `blockTime` reads the time of the
   * block that reverted (asked only when there is one and the chain has a cooling-off).
   */
  const requireNotCoolingOff = <E>(
    chain: ResolvedChain,
    payer: Hex,
    held: PayerStanding,
    now: number,
    blockTime: (block: bigint) => Effect.Effect<number, E>,
  ) =>
    Effect.gen(function* () {
      if (held.revertedBlock === null) return;
      const cooling = coolingOffSeconds(chain);
      if (cooling === 0) return;
      const left = coolingOffLeft(yield* blockTime(held.revertedBlock), cooling, now);
      if (left === 0) return;
      yield* refused(chain, "cooling_off");
      return yield* new RateLimited({
        code: "payer_cooling_off",
        message: `A gasless transfer by ${payer} reverted on this chain recently (block ${held.revertedBlock}), so none is sent for this wallet for ${cooling} seconds after it. Pay with a transfer from your wallet, or try again later.`,
        retryAfterSeconds: left,
      });
    });

  /** 429 while another gasless transfer of the payer in the token is pending. */
  const requireNoneInFlight = (chain: ResolvedChain, payer: Hex, held: PayerStanding) =>
    held.pending === 0
      ? Effect.void
      : Effect.andThen(
          refused(chain, "in_flight"),
          Effect.fail(
            new RateLimited({
              code: "authorization_in_flight",
              message: `Another gasless transfer by ${payer} in this token is on its way to the chain. Try again once it is mined.`,
              retryAfterSeconds: IN_FLIGHT_RETRY_SECONDS,
            }),
          ),
        );

  /** Records a transfer (or deployment) the relayer sent for a payer; the same purpose again adds nothing. */
  const record = (transfer: GaslessTransfer) =>
    Effect.gen(function* () {
      const at = new Date(yield* Clock.currentTimeMillis);
      yield* sql`INSERT INTO billing.gasless_transfers ${sql.insert({
        chain_id: transfer.chainId,
        purpose: transfer.purpose,
        kind: transfer.kind,
        token_address: transfer.token.toLowerCase(),
        payer_address: transfer.payer.toLowerCase(),
        value: transfer.value.toString(),
        payment_id: transfer.paymentId,
        created_at: at,
      })} ON CONFLICT DO NOTHING`;
    });

  /** Deletes a chain's rows (the local stack's crash recovery). */
  const forgetChain = (chainId: number) =>
    Effect.asVoid(sql`DELETE FROM billing.gasless_transfers WHERE chain_id = ${chainId}`);

  return {
    lock,
    standing,
    requireNotCoolingOff,
    requireNoneInFlight,
    /** Counts a refusal for the reserved balance (the caller answers it). */
    refusedReserved: (chain: ResolvedChain) => refused(chain, "reserved"),
    record,
    forgetChain,
  };
});

export class GaslessPayers extends Context.Service<GaslessPayers>()("GaslessPayers", { make }) {
  static readonly layer = Layer.effect(GaslessPayers, make);
}
