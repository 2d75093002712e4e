/**
 * Open payments written straight into a stack's database, for the tests and benchmarks that need
 * thousands: the state a merchant reaches by opening them through the API over minutes or days, without
 * the minutes. Nobody can pay one (its deposit address is random, not derived from the escrow's), and the
 * API's open-payments limit is not asked (they are counted in it, though).
 */
import { Effect } from "effect";
import { SqlClient } from "effect/sql";

export interface SeededPayments {
  readonly merchantId: string;
  readonly chainId: number;
  /** The token's, payee's and operator's addresses as the API writes them. */
  readonly token: string;
  readonly payee: string;
  readonly operator: string;
  /** Base units each. */
  readonly amount: bigint;
  /** Chain time; each is watched for a week after it. */
  readonly expiresAt: number;
  readonly createdBlock: bigint;
  /** Ids are `pay_SEEDED` and their number, zero-padded: numbers `first` to `first + count - 1`. */
  readonly first: number;
  readonly count: number;
  /** Makes the addresses, on-chain ids and page tokens differ from another seeding's. */
  readonly salt: string;
}

/**
 * Inserts the payments (status `requires_payment`, no escrow hold) and counts them in the merchant's
 * open-payments bound as the API's creations would (payments/open-payments.ts); their ids and deposit
 * addresses.
 */
export const seedOpenPayments = (p: SeededPayments) =>
  Effect.flatMap(SqlClient.SqlClient, (sql) =>
    sql.withTransaction(
      Effect.tap(
        sql<{ id: string; address: string }>`INSERT INTO billing.payments (id, merchant_id, livemode,
            chain_id, token_address, payee_address, operator_address, hold_seconds, onchain_id,
            deposit_address, page_token, amount, status, expires_at, watch_until, created_block)
          SELECT 'pay_SEEDED' || lpad(g::text, 20, '0'), ${p.merchantId}::text, false, ${p.chainId}::bigint,
            ${p.token}::text, ${p.payee}::text, ${p.operator}::text, 0,
            '0x' || md5('id' || g || ${p.salt}::text) || md5('id2' || g || ${p.salt}::text),
            '0x' || md5('address' || g || ${p.salt}::text) || left(md5('address2' || g || ${p.salt}::text), 8),
            md5('page' || g || ${p.salt}::text) || md5('page2' || g || ${p.salt}::text),
            ${p.amount.toString()}::numeric, 'requires_payment', ${p.expiresAt}::bigint,
            ${p.expiresAt + 604_800}::bigint, ${p.createdBlock.toString()}::bigint
          FROM generate_series(${p.first}::int, ${p.first + p.count - 1}::int) g
          RETURNING id, deposit_address AS address`,
        () =>
          sql`INSERT INTO billing.open_payment_counts AS o (merchant_id, chain_id, bound)
            VALUES (${p.merchantId}, ${p.chainId}, ${p.count})
            ON CONFLICT (merchant_id, chain_id) DO UPDATE SET bound = o.bound + ${p.count}`,
      ),
    ),
  );
