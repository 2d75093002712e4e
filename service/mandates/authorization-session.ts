/**
 * The hosted authorization page's view of a mandate (its view model): what the customer is asked to
 * approve, on which chain and token, whether anything is left to sign, and a transaction under way. The
 * signing itself is authorization-signing.ts.
 */
import { Context, Effect, Layer, Schema } from "effect";
import type { SqlError } from "effect/sql";
import { getAddress, type Hex } from "viem";
import { authorizationAction } from "../chains/authorization-groups.ts";
import { nativeCurrencyOf, type ResolvedChain, tokenOf } from "../chains/config.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { type RelayedTransaction, Relayer } from "../chains/relayer.ts";
import { unavailable } from "../chains/unavailable.ts";
import { NotFound, type Unavailable } from "../errors.ts";
import { Merchants } from "../merchants/merchants.ts";
import { formatDecimal } from "../money/decimal.ts";
import { MANDATE_STATUSES, type MandateRow } from "./mandate-object.ts";
import { MandateStore } from "./mandate-store.ts";
import { TokenReads } from "./token-reads.ts";

const Address = Schema.TemplateLiteral(["0x", Schema.String]);

/** A chain as a hosted page hands it to the wallet (to switch to it, or add it with `rpc_url`). */
export const WalletChain = Schema.Struct({
  id: Schema.Int,
  name: Schema.String,
  rpc_url: Schema.NullOr(Schema.String),
  native_currency: Schema.Struct({ name: Schema.String, symbol: Schema.String, decimals: Schema.Int }),
});

export const AuthorizationSessionObject = Schema.Struct({
  object: Schema.Literal("authorization_session"),
  mandate: Schema.String,
  livemode: Schema.Boolean,
  status: Schema.Literals(MANDATE_STATUSES),
  needs_signature: Schema.Boolean,
  merchant: Schema.Struct({ name: Schema.String }),
  chain: WalletChain,
  token: Schema.Struct({
    symbol: Schema.String,
    address: Address,
    decimals: Schema.Int,
    permit: Schema.Boolean,
  }),
  /** The cap to sign: a pending raise's, or the mandate's. */
  cap_decimal: Schema.String,
  /** A raise the merchant asked for and the customer has not signed yet: from the cap in force to `cap_decimal`. */
  cap_change: Schema.NullOr(Schema.Struct({ from_decimal: Schema.String, to_decimal: Schema.String })),
  period: Schema.Literal("month"),
  approval_periods: Schema.Int,
  approval_decimal: Schema.String,
  hold_seconds: Schema.Int,
  customer_address: Schema.NullOr(Address),
  pending_transaction: Schema.NullOr(Schema.String),
}).annotate({ identifier: "AuthorizationSession" });
export type AuthorizationSession = typeof AuthorizationSessionObject.Type;

export const notFoundAuthorization = new NotFound({
  code: "authorization_not_found",
  message: "This authorization link is not valid. Ask the merchant for a new one.",
  param: null,
});

/** An authorization link's token: 24 random bytes in base64url (32 characters; 20-80 accepted). */
export const AUTHORIZATION_TOKEN_PATTERN = /^[A-Za-z0-9_-]{20,80}$/;

/** Whether the customer has something to sign: the first signature, a spent approval, or a raise of the cap. */
export const needsSignature = (mandate: MandateRow) =>
  mandate.status === "pending" ||
  mandate.status === "requires_authorization" ||
  (mandate.status === "active" && mandate.pending_cap !== null);

/** The cap the customer signs now: a pending raise's, or the cap in force. */
export const capToSign = (mandate: MandateRow) => BigInt(mandate.pending_cap ?? mandate.cap);

/** The chain a mandate is on; a mandate on a chain no longer configured is a defect. */
export const chainOfMandate = (registry: ChainRegistry["Service"], mandate: MandateRow) => {
  const chain = registry.byId(mandate.chain_id);
  return chain
    ? Effect.succeed(chain)
    : Effect.die(new Error(`mandate ${mandate.id} is on an unconfigured chain`));
};

const walletRpc = (chain: ResolvedChain) => chain.wallet_rpc_url ?? (chain.local ? chain.rpc.http[0] : null);

/** The chain for the wallet: the RPC URL a wallet may add it with (none for a live chain without one). */
export const walletChainOf = (chain: ResolvedChain): typeof WalletChain.Type => ({
  id: chain.id,
  name: chain.name,
  rpc_url: walletRpc(chain),
  native_currency: nativeCurrencyOf(chain),
});

const make = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const relayer = yield* Relayer;
  const store = yield* MandateStore;
  const merchants = yield* Merchants;
  const tokens = yield* TokenReads;

  const mandateFor = (token: string): Effect.Effect<MandateRow, NotFound | SqlError.SqlError> =>
    (AUTHORIZATION_TOKEN_PATTERN.test(token)
      ? store.byAuthorizationToken(token)
      : Effect.succeed(undefined)
    ).pipe(Effect.flatMap((row) => (row ? Effect.succeed(row) : Effect.fail(notFoundAuthorization))));

  /** The session; `submitted` is the transaction a submission was just answered with, if any. */
  const session = (
    mandate: MandateRow,
    submitted?: RelayedTransaction,
  ): Effect.Effect<AuthorizationSession, SqlError.SqlError | Unavailable> =>
    Effect.gen(function* () {
      const chain = yield* chainOfMandate(registry, mandate);
      const token = tokenOf(chain, mandate.token_address);
      const decimals = token?.decimals ?? 0;
      const merchant = yield* merchants.byId(mandate.merchant_id);
      let pending: string | null = null;
      if (mandate.onchain_id !== null && needsSignature(mandate)) {
        const action = authorizationAction(
          chain.id,
          mandate.onchain_id,
          BigInt((mandate.signature_version ?? 0) + 1),
        );
        const tx = submitted?.action === action ? submitted : yield* relayer.findAction(chain.id, action);
        if (tx && (tx.status === "pending" || tx.status === "mined")) pending = tx.hash;
      }
      // A chain that cannot say whether the token takes permits is a 503: guessing "no" would ask the
      // customer for an approve transaction (and gas) needlessly.
      const permit = yield* tokens
        .permitDomain(chain, mandate.token_address as Hex)
        .pipe(Effect.mapError(unavailable));
      const cap = capToSign(mandate);
      return {
        object: "authorization_session" as const,
        mandate: mandate.id,
        livemode: mandate.livemode,
        status: mandate.status,
        needs_signature: needsSignature(mandate) && pending === null,
        merchant: { name: merchant?.name ?? "" },
        chain: walletChainOf(chain),
        token: {
          symbol: token?.symbol ?? mandate.token_address,
          address: getAddress(mandate.token_address),
          decimals,
          permit: permit._tag === "Some",
        },
        cap_decimal: formatDecimal(cap, decimals),
        cap_change:
          mandate.pending_cap !== null && mandate.status !== "revoked"
            ? {
                from_decimal: formatDecimal(BigInt(mandate.cap), decimals),
                to_decimal: formatDecimal(cap, decimals),
              }
            : null,
        period: "month" as const,
        approval_periods: mandate.approval_periods,
        approval_decimal: formatDecimal(cap * BigInt(mandate.approval_periods), decimals),
        hold_seconds: mandate.hold_seconds,
        customer_address: mandate.customer_address ? getAddress(mandate.customer_address) : null,
        pending_transaction: pending,
      };
    });

  return { mandateFor, session };
});

export class AuthorizationSessions extends Context.Service<AuthorizationSessions>()("AuthorizationSessions", {
  make,
}) {
  static readonly layer = Layer.effect(AuthorizationSessions, make);
}
