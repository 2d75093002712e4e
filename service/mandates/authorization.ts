/**
 * The customer's side of a mandate: what the hosted authorization page shows, the terms it asks the
 * wallet to sign, and the submission of the signatures, which the relayer sends on chain (so the
 * customer pays no gas). A mandate is bound to the first wallet that signs it; re-signing (after the
 * approval is spent) must come from that wallet and keeps the same mandate id, payee, token and anchor.
 * The test-mode authorize helper goes through the same path with a deterministic test wallet.
 */
import { Context, Effect, Layer, Option, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import {
  encodeFunctionData,
  erc20Abi,
  getAddress,
  type Hex,
  isAddress,
  parseAbi,
  parseSignature,
} from "viem";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import {
  ChainClients,
  type ChainUnavailable,
  type EscrowRevert,
  escrowCallData,
} from "../chains/chain-clients.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer, type RelayerError, relayerBudgetExhausted } from "../chains/relayer.ts";
import { InvalidRequest, NotFound, RateLimited, Unavailable } from "../errors.ts";
import { newId } from "../ids.ts";
import { formatDecimal } from "../money/decimal.ts";
import { type MandateRow, tokenOf } from "./mandate-object.ts";
import { Mandates } from "./mandates.ts";
import {
  onchainMandateId,
  type PermitDomain,
  type PermitMessage,
  permitTypedDataJson,
  SIGNATURE_WINDOW_SECONDS,
  TERMS_TYPES,
  type TermsMessage,
  termsDomain,
  termsMessage,
  termsTypedDataJson,
} from "./terms.ts";

const permitAbi = parseAbi([
  "function nonces(address owner) view returns (uint256)",
  "function eip712Domain() view returns (bytes1 fields, string name, string version, uint256 chainId, address verifyingContract, bytes32 salt, uint256[] extensions)",
]);

const Address = Schema.String.check(
  Schema.isPattern(/^0x[0-9a-fA-F]{40}$/, { message: "must be a 0x-prefixed 20-byte hex address" }),
);
const Signature = Schema.String.check(
  Schema.isPattern(/^0x[0-9a-fA-F]{130,}$/, { message: "must be a 0x-prefixed hex signature" }),
);
const UintText = Schema.Union([
  Schema.String.check(Schema.isPattern(/^\d{1,78}$/)),
  Schema.Int.check(Schema.isGreaterThanOrEqualTo(0)),
]);

export const TermsRequest = Schema.Struct({ customer_address: Address }).annotate({
  identifier: "AuthorizationTermsRequest",
});

export const SignedTerms = Schema.Struct({
  mandateId: Schema.String,
  payee: Schema.String,
  token: Schema.String,
  cap: UintText,
  anchor: UintText,
  approvalPeriods: UintText,
  operator: Schema.String,
  holdSeconds: UintText,
  nonce: UintText,
  deadline: UintText,
});

export const SignaturesRequest = Schema.Struct({
  customer_address: Address,
  terms: SignedTerms,
  signature: Signature,
  permit_signature: Schema.optionalKey(Schema.NullOr(Signature)),
}).annotate({ identifier: "AuthorizationSignaturesRequest" });
export type SignaturesRequest = typeof SignaturesRequest.Type;

export interface AuthorizationSession {
  readonly object: "authorization_session";
  readonly mandate: string;
  readonly livemode: boolean;
  readonly status: MandateRow["status"];
  readonly needs_signature: boolean;
  readonly merchant: { readonly name: string };
  readonly chain: {
    readonly id: number;
    readonly name: string;
    readonly rpc_url: string | null;
    readonly native_currency: { readonly name: string; readonly symbol: string; readonly decimals: number };
  };
  readonly token: {
    readonly symbol: string;
    readonly address: `0x${string}`;
    readonly decimals: number;
    readonly permit: boolean;
  };
  readonly cap_decimal: string;
  readonly period: "month";
  readonly approval_periods: number;
  readonly approval_decimal: string;
  readonly hold_seconds: number;
  readonly customer_address: `0x${string}` | null;
  readonly pending_transaction: string | null;
}

/** What a wallet is asked to sign (or send) for a mandate, as JSON for EIP-1193 wallets. */
export interface AuthorizationRequest {
  readonly terms: ReturnType<typeof termsTypedDataJson>;
  readonly permit: ReturnType<typeof permitTypedDataJson> | null;
  readonly approve: { readonly to: string; readonly data: Hex } | null;
}

/** The same request with typed values, for signing in-process (the test wallet). */
export interface TypedAuthorizationRequest {
  readonly json: AuthorizationRequest;
  readonly terms: TermsMessage;
  readonly permit: { readonly domain: PermitDomain; readonly message: PermitMessage } | null;
}

const refuse = (code: string, message: string, param: string | null = null) =>
  new InvalidRequest({ code, message, param });

const unavailable = (error: ChainUnavailable | RelayerError) =>
  error._tag === "RelayerError" && error.reason === "budget_exhausted"
    ? relayerBudgetExhausted
    : new Unavailable({
        code: "chain_unavailable",
        message: `The chain did not answer (${error.message}). Retry shortly.`,
      });

export const notFoundAuthorization = new NotFound({
  code: "authorization_not_found",
  message: "This authorization link is not valid. Ask the merchant for a new one.",
  param: null,
});

/**
 * The relayer action of one signature version of a mandate. Each attempt is a transaction of its own
 * (`<action>:<id>`): after one reverts, the same signature can be sent again; while one is pending or
 * mined, submitting again returns it.
 */
export const authorizationAction = (chainId: number, onchainId: string, nonce: bigint) =>
  `authorize:${chainId}:${onchainId.toLowerCase()}:${nonce}`;

/** How many authorize transactions the relayer pays for one mandate in a day (re-signatures, retries). */
export const AuthorizationLimits = Context.Reference<{ readonly transactionsPerMandatePerDay: number }>(
  "AuthorizationLimits",
  { defaultValue: () => ({ transactionsPerMandatePerDay: 5 }) },
);

const needsSignature = (mandate: MandateRow) =>
  mandate.status === "pending" || mandate.status === "requires_authorization";

const authorizeFailure: Record<string, string> = {
  InvalidSignature: "The signature does not match the terms and the wallet.",
  SignatureExpired: "The signature expired before it reached the chain. Sign again.",
  StaleNonce: "These terms were already signed. Reload the page.",
  TermsMismatch: "The terms differ from the mandate already on chain.",
  PermitFailed: "The token refused the spending permission (permit). Sign again.",
  Revoked: "You revoked this mandate; it cannot be signed again.",
  InvalidTerms: "The terms are not valid on this chain.",
};

export type AuthorizeFailure = InvalidRequest | Unavailable | RateLimited | SqlError.SqlError;

export class Authorizations extends Context.Service<
  Authorizations,
  {
    readonly mandateFor: (token: string) => Effect.Effect<MandateRow, NotFound | SqlError.SqlError>;
    readonly session: (mandate: MandateRow) => Effect.Effect<AuthorizationSession, SqlError.SqlError>;
    readonly request: (
      mandate: MandateRow,
      customer: Hex,
      options?: { readonly resign?: boolean },
    ) => Effect.Effect<TypedAuthorizationRequest, AuthorizeFailure>;
    /** Verifies the signatures, binds the wallet and submits the authorization; returns the relayer purpose. */
    readonly submit: (
      mandate: MandateRow,
      input: SignaturesRequest,
    ) => Effect.Effect<{ readonly purpose: string; readonly nonce: bigint }, AuthorizeFailure>;
  }
>()("Authorizations") {
  static readonly layer = Layer.effect(
    Authorizations,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const registry = yield* ChainRegistry;
      const clients = yield* ChainClients;
      const relayer = yield* Relayer;
      const mandates = yield* Mandates;
      const limits = yield* AuthorizationLimits;

      const chainOf = (mandate: MandateRow): Effect.Effect<ResolvedChain> => {
        const chain = registry.byId(mandate.chain_id);
        return chain
          ? Effect.succeed(chain)
          : Effect.die(new Error(`mandate ${mandate.id} is on an unconfigured chain`));
      };

      const mandateFor = (token: string) =>
        (/^[A-Za-z0-9_-]{20,80}$/.test(token)
          ? mandates.byAuthorizationToken(token)
          : Effect.succeed(undefined)
        ).pipe(Effect.flatMap((row) => (row ? Effect.succeed(row) : Effect.fail(notFoundAuthorization))));

      // A token's EIP-712 domain never changes: read it once (the page polls the session).
      const permitDomains = new Map<string, PermitDomain>();
      const permitDomain = (chain: ResolvedChain, token: Hex): Effect.Effect<Option.Option<PermitDomain>> => {
        const known = permitDomains.get(`${chain.id}:${token.toLowerCase()}`);
        if (known) return Effect.succeed(Option.some(known));
        return clients
          .rpc(chain, "eip712Domain", () =>
            clients
              .client(chain)
              .readContract({ address: token, abi: permitAbi, functionName: "eip712Domain" }),
          )
          .pipe(
            Effect.map(
              ([, name, version, chainId, verifyingContract]): PermitDomain => ({
                name,
                version,
                chainId: Number(chainId),
                verifyingContract,
              }),
            ),
            Effect.tap((domain) =>
              Effect.sync(() => permitDomains.set(`${chain.id}:${token.toLowerCase()}`, domain)),
            ),
            Effect.option,
          );
      };

      const session = (mandate: MandateRow) =>
        Effect.gen(function* () {
          const chain = yield* chainOf(mandate);
          const token = tokenOf(chain, mandate.token_address);
          const decimals = token?.decimals ?? 0;
          const [merchant] = yield* sql<{
            name: string;
          }>`SELECT name FROM billing.merchants WHERE id = ${mandate.merchant_id}`;
          let pending: string | null = null;
          if (mandate.onchain_id !== null && needsSignature(mandate)) {
            const tx = yield* relayer.findAction(
              chain.id,
              authorizationAction(chain.id, mandate.onchain_id, BigInt((mandate.signature_version ?? 0) + 1)),
            );
            if (tx && (tx.status === "pending" || tx.status === "mined")) pending = tx.hash;
          }
          const permit = yield* permitDomain(chain, mandate.token_address as Hex);
          const cap = BigInt(mandate.cap);
          return {
            object: "authorization_session" as const,
            mandate: mandate.id,
            livemode: mandate.livemode,
            status: mandate.status,
            needs_signature: needsSignature(mandate) && pending === null,
            merchant: { name: merchant?.name ?? "" },
            chain: {
              id: chain.id,
              name: chain.name,
              rpc_url: chain.wallet_rpc_url ?? (chain.local ? chain.rpc.http[0] : null),
              native_currency: { name: "Ether", symbol: "ETH", decimals: 18 },
            },
            token: {
              symbol: token?.symbol ?? mandate.token_address,
              address: getAddress(mandate.token_address),
              decimals,
              permit: permit._tag === "Some",
            },
            cap_decimal: formatDecimal(cap, decimals),
            period: "month" as const,
            approval_periods: mandate.approval_periods,
            approval_decimal: formatDecimal(cap * BigInt(mandate.approval_periods), decimals),
            hold_seconds: mandate.hold_seconds,
            customer_address: mandate.customer_address ? getAddress(mandate.customer_address) : null,
            pending_transaction: pending,
          };
        });

      /** The signature version on chain (0 before the first signature). */
      const onchainNonce = (chain: ResolvedChain, onchainId: Hex) =>
        clients
          .rpc(chain, "mandate", () =>
            clients.client(chain).readContract({
              address: chain.escrow.address,
              abi: MandateEscrowAbi,
              functionName: "mandate",
              args: [onchainId],
            }),
          )
          .pipe(Effect.map((m) => BigInt((m as { nonce: bigint | number }).nonce)));

      const expectedTerms = (
        mandate: MandateRow,
        chain: ResolvedChain,
        customer: Hex,
        nonce: bigint,
        deadline: number,
      ) =>
        termsMessage({
          chainId: chain.id,
          escrow: chain.escrow.address,
          customer,
          salt: BigInt(mandate.salt),
          payee: mandate.payee_address as Hex,
          token: mandate.token_address as Hex,
          cap: BigInt(mandate.cap),
          anchor: mandate.anchor,
          approvalPeriods: mandate.approval_periods,
          operator: mandate.operator_address as Hex,
          holdSeconds: mandate.hold_seconds,
          nonce,
          deadline,
        });

      const checkSigner = (mandate: MandateRow, customer: Hex, resign: boolean) =>
        Effect.gen(function* () {
          if (mandate.status === "revoked")
            return yield* refuse(
              "mandate_revoked",
              "This mandate was revoked by the customer; it cannot be signed again.",
            );
          if (
            mandate.customer_address !== null &&
            mandate.customer_address.toLowerCase() !== customer.toLowerCase()
          )
            return yield* refuse(
              "wrong_account",
              `This mandate belongs to wallet ${mandate.customer_address}. Switch your wallet to that account.`,
              "customer_address",
            );
          if (!resign && !needsSignature(mandate))
            return yield* refuse(
              "nothing_to_sign",
              "This mandate is already signed; nothing is left to sign.",
            );
        });

      const request = (mandate: MandateRow, customer: Hex, options: { readonly resign?: boolean } = {}) =>
        Effect.gen(function* () {
          const chain = yield* chainOf(mandate);
          yield* checkSigner(mandate, customer, options.resign ?? false);
          const onchainId = onchainMandateId(customer, BigInt(mandate.salt));
          const nonce = (yield* onchainNonce(chain, onchainId).pipe(Effect.mapError(unavailable))) + 1n;
          const now = yield* clients.latestTime(chain).pipe(Effect.mapError(unavailable));
          const deadline = now + SIGNATURE_WINDOW_SECONDS;
          const message = expectedTerms(mandate, chain, customer, nonce, deadline);
          const token = mandate.token_address as Hex;
          const value = BigInt(mandate.cap) * BigInt(mandate.approval_periods);
          const domain = yield* permitDomain(chain, token);
          let permit: TypedAuthorizationRequest["permit"] = null;
          let approve: AuthorizationRequest["approve"] = null;
          if (domain._tag === "Some") {
            const permitNonce = yield* clients
              .rpc(chain, "nonces", () =>
                clients
                  .client(chain)
                  .readContract({ address: token, abi: permitAbi, functionName: "nonces", args: [customer] }),
              )
              .pipe(Effect.mapError(unavailable));
            permit = {
              domain: domain.value,
              message: {
                owner: customer,
                spender: chain.escrow.address,
                value,
                nonce: permitNonce,
                deadline: BigInt(deadline),
              },
            };
          } else {
            const allowance = yield* clients
              .rpc(chain, "allowance", () =>
                clients.client(chain).readContract({
                  address: token,
                  abi: erc20Abi,
                  functionName: "allowance",
                  args: [customer, chain.escrow.address],
                }),
              )
              .pipe(Effect.mapError(unavailable));
            if (allowance < value)
              approve = {
                to: token,
                data: encodeFunctionData({
                  abi: erc20Abi,
                  functionName: "approve",
                  args: [chain.escrow.address, value],
                }),
              };
          }
          return {
            json: {
              terms: termsTypedDataJson(chain.id, chain.escrow.address, message),
              permit: permit && permitTypedDataJson(permit.domain, permit.message),
              approve,
            },
            terms: message,
            permit,
          };
        });

      const submit = (mandate: MandateRow, input: SignaturesRequest) =>
        Effect.gen(function* () {
          const chain = yield* chainOf(mandate);
          const customer = getAddress(input.customer_address);
          yield* checkSigner(mandate, customer, true);
          const signed = input.terms;
          const nonce = BigInt(signed.nonce);
          const deadline = Number(signed.deadline);
          const expected = expectedTerms(mandate, chain, customer, nonce, deadline);
          const same =
            signed.mandateId.toLowerCase() === expected.mandateId.toLowerCase() &&
            isAddress(signed.payee) &&
            signed.payee.toLowerCase() === expected.payee.toLowerCase() &&
            signed.token.toLowerCase() === expected.token.toLowerCase() &&
            BigInt(signed.cap) === expected.cap &&
            BigInt(signed.anchor) === expected.anchor &&
            Number(signed.approvalPeriods) === expected.approvalPeriods &&
            signed.operator.toLowerCase() === expected.operator.toLowerCase() &&
            BigInt(signed.holdSeconds) === expected.holdSeconds;
          if (!same)
            return yield* refuse(
              "terms_changed",
              "These are not the mandate's terms. Reload the page and sign again.",
              "terms",
            );
          const now = yield* clients.latestTime(chain).pipe(Effect.mapError(unavailable));
          if (deadline < now)
            return yield* refuse(
              "terms_expired",
              "The signature's deadline has passed. Sign the new terms.",
              "terms",
            );
          const current = yield* onchainNonce(chain, expected.mandateId).pipe(Effect.mapError(unavailable));
          if (nonce <= current)
            return yield* refuse(
              "terms_changed",
              "These terms were already signed. Reload the page.",
              "terms",
            );
          const valid = yield* clients
            .rpc(chain, "verify", () =>
              clients.client(chain).verifyTypedData({
                address: customer,
                domain: termsDomain(chain.id, chain.escrow.address),
                types: TERMS_TYPES,
                primaryType: "Terms",
                message: expected,
                signature: input.signature as Hex,
              }),
            )
            .pipe(Effect.mapError(unavailable));
          if (!valid)
            return yield* refuse(
              "signature_invalid",
              "The signature does not match these terms and this wallet.",
              "signature",
            );
          const permitSignature = input.permit_signature ?? null;
          const value = expected.cap * BigInt(expected.approvalPeriods);
          const args: readonly unknown[] =
            permitSignature === null
              ? [expected, input.signature]
              : (() => {
                  const { v, r, s, yParity } = parseSignature(permitSignature as Hex);
                  return [
                    expected,
                    input.signature,
                    value,
                    expected.deadline,
                    Number(v ?? BigInt(yParity + 27)),
                    r,
                    s,
                  ];
                })();
          const functionName = permitSignature === null ? "authorize" : "authorizeWithPermit";
          if (relayer.address === undefined)
            return yield* new Unavailable({
              code: "relayer_unavailable",
              message: "This service cannot send transactions.",
            });
          const simulated = yield* clients.simulateEscrow(chain, relayer.address, functionName, args).pipe(
            Effect.as(undefined),
            Effect.catchTag("EscrowRevert", (revert: EscrowRevert) => Effect.succeed(revert)),
            Effect.mapError(unavailable),
          );
          if (simulated !== undefined)
            return yield* refuse(
              "authorization_failed",
              authorizeFailure[simulated.errorName] ??
                `The chain refused the authorization (${simulated.errorName}).`,
            );
          const action = authorizationAction(chain.id, expected.mandateId, nonce);
          return yield* sql.withTransaction(
            Effect.gen(function* () {
              const bound = yield* sql`UPDATE billing.mandates
                SET customer_address = ${customer}, onchain_id = ${expected.mandateId}, updated_at = now()
                WHERE id = ${mandate.id} AND (customer_address IS NULL OR lower(customer_address) = ${customer.toLowerCase()})
                RETURNING id`;
              if (bound.length === 0)
                return yield* refuse(
                  "wrong_account",
                  "Another wallet signed this mandate first.",
                  "customer_address",
                );
              // Under the mandate's row lock (taken just above): one decision per mandate at a time.
              yield* checkTransactionLimit(chain, expected.mandateId, action);
              const sent = yield* relayer
                .submit(chain.id, {
                  to: chain.escrow.address,
                  data: escrowCallData(functionName, args),
                  purpose: `${action}:${yield* newId("request")}`,
                  action,
                })
                .pipe(Effect.catchTag("RelayerError", (e) => Effect.fail(unavailable(e))));
              return { purpose: sent.purpose, nonce };
            }),
          );
        });

      /**
       * Every authorize transaction is paid by the relayer, and anyone holding the link can re-sign, so
       * a mandate gets at most `transactionsPerMandatePerDay` of them (a submission answered by an
       * attempt already pending or mined sends nothing and is not refused).
       */
      const checkTransactionLimit = (chain: ResolvedChain, onchainId: Hex, action: string) =>
        Effect.gen(function* () {
          const live = yield* relayer.findAction(chain.id, action);
          if (live && (live.status === "pending" || live.status === "mined")) return;
          const prefix = `authorize:${chain.id}:${onchainId.toLowerCase()}:`;
          const [recent] = yield* sql<{ count: number; retry_after: number | null }>`
            SELECT count(*)::int AS count,
              ceil(extract(epoch FROM min(created_at) + interval '1 day' - now()))::int AS retry_after
            FROM billing.relayer_transactions
            WHERE chain_id = ${chain.id} AND starts_with(action, ${prefix})
              AND created_at > now() - interval '1 day'`;
          if ((recent?.count ?? 0) >= limits.transactionsPerMandatePerDay)
            return yield* new RateLimited({
              code: "authorization_limit_reached",
              message: `This mandate was sent to the chain ${limits.transactionsPerMandatePerDay} times in the last day, the most allowed. Try again later.`,
              retryAfterSeconds: recent?.retry_after ?? 3600,
            });
        });

      return { mandateFor, session, request, submit };
    }),
  );
}
