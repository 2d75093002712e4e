/**
 * How a merchant configures its chains: one payout address per chain, and which of the chain's
 * tokens it accepts. Each POST records a new configuration and supersedes the previous one, so
 * finance can see which payout address was in force when.
 */
import { Context, Effect, Layer, Option, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { getAddress, isAddress, zeroAddress } from "viem";
import { ClearedCaches } from "../db/cleared-caches.ts";
import { decodeRows } from "../db/rows.ts";
import { type InvalidRequest, invalidParam } from "../errors.ts";
import { newId } from "../ids.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import type { ResolvedChain } from "./config.ts";
import type { MerchantChainObject } from "./objects.ts";
import { ChainRegistry } from "./registry.ts";

export const ConfigureMerchantChain = Schema.Struct({
  chain: Schema.Int.annotate({ description: "EIP-155 chain id, one of GET /v1/chains" }),
  payout_address: Schema.String.annotate({ description: "0x address that receives this merchant's charges" }),
  tokens: Schema.optionalKey(
    Schema.Array(Schema.String).annotate({
      description: "Token symbols to accept; default: every token of the chain",
    }),
  ),
}).annotate({ identifier: "ConfigureMerchantChainRequest" });
export type ConfigureMerchantChain = typeof ConfigureMerchantChain.Type;

const Row = Schema.Struct({
  id: Schema.String,
  chain_id: Schema.BigInt,
  payout_address: Schema.String,
  tokens: Schema.Array(Schema.String),
  created_at: Schema.Date,
});
type Row = typeof Row.Type;
const decodeConfigRows = decodeRows(Row);

const toObject = (row: Row, chain: ResolvedChain): MerchantChainObject => ({
  object: "merchant_chain",
  id: row.id,
  chain: chain.id,
  name: chain.name,
  livemode: chain.livemode,
  subscriptions_available: chain.subscriptions_available,
  payments_available: chain.payments_available,
  escrow_available: chain.escrow_available,
  payout_address: row.payout_address,
  tokens: chain.tokens
    .filter((token) => row.tokens.includes(token.symbol))
    .map(({ symbol, address, decimals }) => ({ symbol, address, decimals })),
  created: Math.floor(row.created_at.getTime() / 1000),
});

/**
 * Told of each payout address registered (in the registration's transaction): the fact relay goes
 * through the address's history once. A port, so that this module needs nothing of the relay.
 */
export class PayoutRegistrations extends Context.Service<
  PayoutRegistrations,
  { readonly registered: (chainId: number, payee: string) => Effect.Effect<void, SqlError.SqlError> }
>()("PayoutRegistrations") {}

export class MerchantChains extends Context.Service<
  MerchantChains,
  {
    readonly configure: (
      scope: MerchantScope,
      input: ConfigureMerchantChain,
    ) => Effect.Effect<MerchantChainObject, InvalidRequest | SqlError.SqlError>;
    /**
     * The scope's current configurations, kept per process (db/cleared-caches.ts: every configuration
     * written, in any process, clears them), so that opening a mandate costs no round trip for them.
     */
    readonly list: (scope: MerchantScope) => Effect.Effect<readonly MerchantChainObject[], SqlError.SqlError>;
    /**
     * The same, read from the database: for an object that fixes a payout address (a mandate's payee, a
     * payment's deposit terms), which must never take the address a change in another process has
     * just replaced (the caches' window between that COMMIT and its notification).
     */
    readonly current: (
      scope: MerchantScope,
    ) => Effect.Effect<readonly MerchantChainObject[], SqlError.SqlError>;
  }
>()("MerchantChains") {
  static readonly layer = Layer.effect(
    MerchantChains,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const registry = yield* ChainRegistry;
      const registrations = yield* PayoutRegistrations;
      const clearCached = Option.match(yield* Effect.serviceOption(ClearedCaches), {
        onNone: () => Effect.void,
        onSome: (caches) => caches.clearAll,
      });

      const configure = (scope: MerchantScope, input: ConfigureMerchantChain) =>
        Effect.gen(function* () {
          const chain = registry.find(input.chain, scope.livemode);
          if (chain === undefined)
            return yield* invalidParam(
              "chain",
              `No such ${scope.livemode ? "live" : "test"} chain: ${input.chain}. See GET /v1/chains.`,
              "chain_unknown",
            );
          if (
            !isAddress(input.payout_address, { strict: false }) ||
            input.payout_address.toLowerCase() === zeroAddress
          )
            return yield* invalidParam(
              "payout_address",
              "payout_address must be a non-zero 0x-prefixed 20-byte address",
            );
          const symbols = input.tokens ?? chain.tokens.map((token) => token.symbol);
          if (symbols.length === 0)
            return yield* invalidParam("tokens", "tokens must name at least one token");
          for (const [i, symbol] of symbols.entries()) {
            if (!chain.tokens.some((token) => token.symbol === symbol))
              return yield* invalidParam(
                `tokens[${i}]`,
                `Chain ${chain.id} does not accept ${JSON.stringify(symbol)}; it accepts ${chain.tokens.map((t) => t.symbol).join(", ")}`,
                "token_unknown",
              );
          }
          const id = yield* newId("merchantChain");
          const payout = getAddress(input.payout_address);
          const rows = yield* sql.withTransaction(
            Effect.gen(function* () {
              // One configuration call per merchant and chain at a time: two concurrent ones would both
              // supersede the same row and then collide on the one-current-configuration index.
              yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`merchant-chain:${scope.merchantId}:${chain.id}`}))`;
              // A payout address identifies its merchant on chain (events are attributed by payee): one owner.
              yield* sql`SELECT pg_advisory_xact_lock(hashtext(${`payout:${chain.id}:${payout.toLowerCase()}`}))`;
              const owners = yield* sql`SELECT 1 FROM billing.merchant_chains
                WHERE chain_id = ${chain.id} AND lower(payout_address) = ${payout.toLowerCase()}
                  AND merchant_id <> ${scope.merchantId} LIMIT 1`;
              if (owners.length > 0)
                return yield* invalidParam(
                  "payout_address",
                  "This payout address belongs to another merchant on this chain. Use an address of your own.",
                  "payout_address_in_use",
                );
              yield* sql`UPDATE billing.merchant_chains SET superseded_at = now()
                WHERE merchant_id = ${scope.merchantId} AND chain_id = ${chain.id} AND superseded_at IS NULL`;
              // The fact relay's cursor may have passed facts sent to this address before it was ours: the
              // first registration asks the relay to go through the address's history once.
              yield* registrations.registered(chain.id, payout);
              return yield* sql`INSERT INTO billing.merchant_chains ${sql.insert({
                id,
                merchant_id: scope.merchantId,
                chain_id: chain.id,
                livemode: chain.livemode,
                payout_address: payout,
                tokens: [...new Set(symbols)],
              })} RETURNING id, chain_id, payout_address, tokens, created_at`;
            }),
          );
          // This process forgets the old configuration without waiting for its own notification.
          yield* clearCached;
          const [row] = yield* decodeConfigRows(rows);
          return toObject(row as Row, chain);
        });

      const read = (scope: MerchantScope) =>
        sql`SELECT id, chain_id, payout_address, tokens, created_at FROM billing.merchant_chains
            WHERE merchant_id = ${scope.merchantId} AND livemode = ${scope.livemode} AND superseded_at IS NULL
            ORDER BY chain_id`.pipe(
          Effect.flatMap(decodeConfigRows),
          Effect.map((rows): readonly MerchantChainObject[] =>
            rows.flatMap((row) => {
              const chain = registry.find(Number(row.chain_id), scope.livemode);
              return chain ? [toObject(row, chain)] : [];
            }),
          ),
        );
      const cached = yield* ClearedCaches.cacheFor((key: string) =>
        read({ merchantId: key.slice(2), livemode: key.startsWith("1") }),
      );
      const list = (scope: MerchantScope) => cached.get(`${scope.livemode ? 1 : 0}:${scope.merchantId}`);

      return { configure, list, current: read };
    }),
  );
}
