/**
 * The hosted pay page's view of a payment (its view model), found by the page token of `payment_url`:
 * what is due and what arrived, the token and network, the deposit address and its EIP-681 link, the
 * expiry in chain time, and whether the token lets the payer pay without gas (EIP-3009
 * `transferWithAuthorization`, submitted by the relayer: gasless-payments.ts) with the typed data to sign.
 */
import { Clock, Context, Effect, Layer, Option, Schema } from "effect";
import type { SqlError } from "effect/sql";
import { getAddress, type Hex, parseAbi, zeroAddress, zeroHash } from "viem";
import { PAYMENT_STATUSES } from "../../src/ledger/payment-machine.ts";
import { ChainClients, lacksFunction } from "../chains/chain-clients.ts";
import { ChainHeads } from "../chains/chain-heads.ts";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { NotFound } from "../errors.ts";
import { WalletChain, walletChainOf } from "../mandates/authorization-session.ts";
import { EIP712_DOMAIN, type TokenDomain } from "../mandates/terms.ts";
import { TokenReads } from "../mandates/token-reads.ts";
import { Merchants } from "../merchants/merchants.ts";
import { formatDecimal } from "../money/decimal.ts";
import type { PaymentRow } from "./payment-object.ts";
import { PaymentStore } from "./payment-store.ts";
import {
  amountOverpaid,
  amountToSend,
  erc681TransferUri,
  TRANSFER_WITH_AUTHORIZATION_TYPES,
} from "./transfer-authorization.ts";

const Address = Schema.TemplateLiteral(["0x", Schema.String]);
const Decimal = Schema.String;

const Field = Schema.Struct({ name: Schema.String, type: Schema.String });

export const PaySessionObject = Schema.Struct({
  object: Schema.Literal("pay_session"),
  payment: Schema.String,
  livemode: Schema.Boolean,
  status: Schema.Literals(PAYMENT_STATUSES),
  merchant: Schema.Struct({ name: Schema.String }),
  description: Schema.NullOr(Schema.String),
  amount_decimal: Decimal,
  /** Confirmed received (swept and indexed). */
  amount_received_decimal: Decimal,
  /** Arrived at the deposit address, not confirmed yet. */
  amount_pending_decimal: Decimal,
  /** Still to send: amount − received − pending, at least 0. */
  amount_remaining_decimal: Decimal,
  amount_remaining: Schema.String,
  /** Arrived beyond the amount. */
  amount_overpaid_decimal: Decimal,
  token: Schema.Struct({ symbol: Schema.String, address: Address, decimals: Schema.Int }),
  chain: WalletChain,
  /** The deposit address, checksummed. */
  address: Address,
  /** EIP-681 link of a transfer of what is left to send (the QR code); null when nothing is left. */
  payment_uri: Schema.NullOr(Schema.String),
  /** Unix seconds, chain time. */
  expires_at: Schema.Int,
  /** The chain's time now (its latest block), so the page counts down in chain time. */
  now: Schema.Int,
  /** Transfers seen arriving at the deposit address. */
  transfers: Schema.Int,
  /** How to pay without gas (EIP-3009); null when the token cannot. */
  gasless: Schema.NullOr(
    Schema.Struct({
      domain: Schema.Struct({
        name: Schema.String,
        version: Schema.String,
        chainId: Schema.Int,
        verifyingContract: Address,
      }),
      types: Schema.Struct({
        EIP712Domain: Schema.Array(Field),
        TransferWithAuthorization: Schema.Array(Field),
      }),
      primary_type: Schema.Literal("TransferWithAuthorization"),
      /** The message's `to`: the deposit address. */
      to: Address,
      /** The message's `value`: what is left to send, in base units. */
      value: Schema.String,
    }),
  ),
  /** The latest gasless transfer the relayer sent for this payment. */
  gasless_transaction: Schema.NullOr(
    Schema.Struct({ hash: Schema.String, status: Schema.Literals(["pending", "mined", "failed"]) }),
  ),
}).annotate({ identifier: "PaySession" });
export type PaySession = typeof PaySessionObject.Type;

export const notFoundPayPage = new NotFound({
  code: "payment_page_not_found",
  message: "This payment link is not valid. Ask the merchant for a new one.",
  param: null,
});

/** A pay page link's token: 24 random bytes in base64url (32 characters; 20-80 accepted). */
export const PAY_PAGE_TOKEN_PATTERN = /^[A-Za-z0-9_-]{20,80}$/;

/** The relayer action of a payment's gasless transfers: one pending or mined at a time. */
export const gaslessAction = (chainId: number, paymentId: string) => `pay-gasless:${chainId}:${paymentId}`;

const eip3009Abi = parseAbi([
  "function authorizationState(address authorizer, bytes32 nonce) view returns (bool)",
]);

/** The chain a payment is on; a payment on a chain no longer configured is a defect. */
export const chainOfPayment = (
  registry: ChainRegistry["Service"],
  payment: Pick<PaymentRow, "id" | "chain_id">,
) => {
  const chain = registry.byId(payment.chain_id);
  return chain
    ? Effect.succeed(chain)
    : Effect.die(new Error(`payment ${payment.id} is on an unconfigured chain`));
};

const make = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const clients = yield* ChainClients;
  const heads = yield* ChainHeads;
  const relayer = yield* Relayer;
  const store = yield* PaymentStore;
  const merchants = yield* Merchants;
  const tokens = yield* TokenReads;
  /** Per token: its EIP-3009 domain, or none; only definite answers are kept (a token never changes). */
  const support = new Map<string, Option.Option<TokenDomain>>();

  const paymentFor = (token: string): Effect.Effect<PaymentRow, NotFound | SqlError.SqlError> =>
    (PAY_PAGE_TOKEN_PATTERN.test(token) ? store.byPageToken(token) : Effect.succeed(undefined)).pipe(
      Effect.flatMap((row) => (row ? Effect.succeed(row) : Effect.fail(notFoundPayPage))),
    );

  /**
   * Whether the token takes EIP-3009 authorizations (it answers `authorizationState`) in an EIP-712
   * domain the service can establish (TokenReads), with that domain; asked once per token. A chain that
   * does not answer means "not now", and is asked again next time.
   */
  const gaslessDomain = (chain: ResolvedChain, token: Hex): Effect.Effect<Option.Option<TokenDomain>> => {
    const key = `${chain.id}:${token.toLowerCase()}`;
    const known = support.get(key);
    if (known) return Effect.succeed(known);
    return Effect.tryPromise({
      try: () =>
        clients.client(chain).readContract({
          address: token,
          abi: eip3009Abi,
          functionName: "authorizationState",
          args: [zeroAddress, zeroHash],
        }),
      catch: (error) => error,
    }).pipe(
      Effect.flatMap(() => tokens.domain(chain, token)),
      Effect.tap((domain) => Effect.sync(() => support.set(key, domain))),
      Effect.catch((error) => {
        const none = Option.none<TokenDomain>();
        if (lacksFunction(error)) support.set(key, none);
        return Effect.succeed(none);
      }),
    );
  };

  /** The latest gasless transfer of the payment, as the page shows it. */
  const gaslessTransaction = (chain: ResolvedChain, payment: PaymentRow) =>
    Effect.map(relayer.findAction(chain.id, gaslessAction(chain.id, payment.id)), (tx) =>
      tx === undefined
        ? null
        : {
            hash: tx.hash,
            status:
              tx.status === "pending" || tx.status === "mined"
                ? tx.status
                : ("failed" as "pending" | "mined" | "failed"),
          },
    );

  const session = (payment: PaymentRow): Effect.Effect<PaySession, SqlError.SqlError> =>
    Effect.gen(function* () {
      const chain = yield* chainOfPayment(registry, payment);
      const token = tokenOf(chain, payment.token_address);
      const decimals = token?.decimals ?? 0;
      const merchant = yield* merchants.byId(payment.merchant_id);
      const [now, gasless, transfers, sent] = yield* Effect.all(
        [
          // A chain that does not answer for a moment: our clock stands in for its time.
          heads
            .latestTime(chain)
            .pipe(Effect.catch(() => Effect.map(Clock.currentTimeMillis, (ms) => Math.floor(ms / 1000)))),
          gaslessDomain(chain, payment.token_address as Hex),
          store.transfersOf([payment.id]),
          gaslessTransaction(chain, payment),
        ],
        { concurrency: "unbounded" },
      );
      const toSend = amountToSend(payment);
      const depositAddress = getAddress(payment.deposit_address);
      const tokenAddress = getAddress(payment.token_address);
      const text = (units: bigint) => formatDecimal(units, decimals);
      return {
        object: "pay_session" as const,
        payment: payment.id,
        livemode: payment.livemode,
        status: payment.status,
        merchant: { name: merchant?.name ?? "" },
        description: payment.description,
        amount_decimal: text(BigInt(payment.amount)),
        amount_received_decimal: text(BigInt(payment.received)),
        amount_pending_decimal: text(BigInt(payment.seen)),
        amount_remaining_decimal: text(toSend),
        amount_remaining: toSend.toString(),
        amount_overpaid_decimal: text(amountOverpaid(payment)),
        token: { symbol: token?.symbol ?? "?", address: tokenAddress, decimals },
        chain: walletChainOf(chain),
        address: depositAddress,
        payment_uri:
          toSend === 0n
            ? null
            : erc681TransferUri({
                token: tokenAddress,
                chainId: chain.id,
                to: depositAddress,
                units: toSend,
              }),
        expires_at: payment.expires_at,
        now,
        transfers: transfers.length,
        gasless: Option.match(gasless, {
          onNone: () => null,
          onSome: (domain) => ({
            domain: { ...domain, verifyingContract: getAddress(domain.verifyingContract) },
            types: {
              EIP712Domain: EIP712_DOMAIN.map((f) => ({ ...f })),
              TransferWithAuthorization: TRANSFER_WITH_AUTHORIZATION_TYPES.TransferWithAuthorization.map(
                (f) => ({
                  ...f,
                }),
              ),
            },
            primary_type: "TransferWithAuthorization" as const,
            to: depositAddress,
            value: toSend.toString(),
          }),
        }),
        gasless_transaction: sent,
      };
    });

  /** The session of a payment read again (after a submission changed it). */
  const reloaded = (paymentId: string) => Effect.flatMap(store.reload(paymentId), session);

  return { paymentFor, session, reloaded, gaslessDomain };
});

export class PaySessions extends Context.Service<PaySessions>()("PaySessions", { make }) {
  static readonly layer = Layer.effect(PaySessions, make);
}
