/**
 * The customer's signature of a mandate: the terms (and the token permit) the wallet is asked to sign,
 * and the submission of the signatures, which the relayer sends on chain (the customer pays no gas).
 * A mandate is bound to the first wallet that signs it; re-signing (after the approval is spent) must
 * come from that wallet and keeps the same mandate id, payee, token and anchor. The test-mode authorize
 * helper goes through the same path with a deterministic test wallet.
 *
 * A smart wallet not deployed yet signs with ERC-6492 wrappers: they are judged against the wallet its
 * factory would deploy (chains/wallet-signatures.ts), the wallet is bound to the mandate and deployed by
 * the relayer (chains/wallet-deployments.ts; the deployment counts against the mandate's daily limit),
 * and the escrow then gets the inner signatures like any deployed wallet's.
 */
import { Context, Effect, Layer, Option } from "effect";
import type { SqlError } from "effect/sql";
import {
  encodeFunctionData,
  erc20Abi,
  getAddress,
  type Hex,
  hashTypedData,
  isAddress,
  isErc6492Signature,
  parseSignature,
  size,
} from "viem";
import { MandateEscrowAbi } from "../../abis/MandateEscrow.ts";
import {
  type AuthorizationItem,
  authorizationAction,
  authorizationPrefix,
} from "../chains/authorization-groups.ts";
import { ChainClients, type ChainUnavailable, escrowCallData } from "../chains/chain-clients.ts";
import { ChainHeads } from "../chains/chain-heads.ts";
import { type ResolvedChain, tokenOf } from "../chains/config.ts";
import { GasCosts } from "../chains/gas-costs.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { TokenStates } from "../chains/token-states.ts";
import { relayerUnavailable, unavailable } from "../chains/unavailable.ts";
import { WalletDeployments } from "../chains/wallet-deployments.ts";
import { type SignedHash, WalletSignatures } from "../chains/wallet-signatures.ts";
import type { ErrorCode } from "../error-codes.ts";
import { InvalidRequest, RateLimited, type Unavailable } from "../errors.ts";
import { newId } from "../ids.ts";
import { formatDecimal } from "../money/decimal.ts";
import type {
  AuthorizationRequest,
  SignaturesRequest,
  TypedAuthorizationRequest,
} from "./authorization-requests.ts";
import { capToSign, chainOfMandate, needsSignature } from "./authorization-session.ts";
import type { MandateRow } from "./mandate-object.ts";
import { MandateStore } from "./mandate-store.ts";
import {
  onchainMandateId,
  PERMIT_TYPES,
  permitTypedDataJson,
  SIGNATURE_WINDOW_SECONDS,
  TERMS_TYPES,
  type TermsMessage,
  type TokenDomain,
  termsDomain,
  termsMessage,
  termsTypedDataJson,
} from "./terms.ts";
import { TokenReads } from "./token-reads.ts";

/** How many authorize transactions the relayer pays for one mandate in a day (re-signatures, retries). */
export const AuthorizationLimits = Context.Reference<{ readonly transactionsPerMandatePerDay: number }>(
  "AuthorizationLimits",
  { defaultValue: () => ({ transactionsPerMandatePerDay: 5 }) },
);

/** What the page needs of the token: the allowance the escrow has, and the permit domain and nonce, if any. */
interface TokenState {
  readonly allowance: bigint;
  readonly permit: { readonly domain: TokenDomain; readonly nonce: bigint } | null;
}

/**
 * Every transaction relayed for a mandate from its hosted page is paid by the relayer, and anyone holding
 * the link can re-sign, so a mandate gets at most `transactionsPerMandatePerDay` of them: authorisations,
 * a deployment of its counterfactual wallet and a signed revocation (their actions share the prefix).
 * Checked only when the submission is admitted: one answered by an attempt already pending or mined sends
 * nothing and is not refused (the relayer answers it before admitting).
 */
export const checkRelayedLimit = (
  relayer: Relayer["Service"],
  limits: (typeof AuthorizationLimits)["Service"],
  chain: ResolvedChain,
  onchainId: Hex,
) =>
  Effect.gen(function* () {
    const recent = yield* relayer.recentActions(chain.id, authorizationPrefix(chain.id, onchainId), "1 day");
    if (recent.count >= limits.transactionsPerMandatePerDay)
      return yield* new RateLimited({
        code: "authorization_limit_reached",
        message: `This mandate was sent to the chain ${limits.transactionsPerMandatePerDay} times in the last day, the most allowed. Try again later.`,
        retryAfterSeconds: recent.retryAfterSeconds,
      });
  });

export type AuthorizeFailure = InvalidRequest | Unavailable | RateLimited | SqlError.SqlError;

const refuse = (code: ErrorCode, message: string, param: string | null = null) =>
  new InvalidRequest({ code, message, param });

const authorizeFailure: Record<string, string> = {
  SignatureExpired: "The signature expired before it reached the chain. Sign again.",
  TermsMismatch: "The terms differ from the mandate already on chain.",
  PermitFailed: "The token refused the spending permission (permit). Sign again.",
  Revoked: "You revoked this mandate; it cannot be signed again.",
  InvalidTerms: "The terms are not valid on this chain.",
};

/** The signed terms are the mandate's (all but nonce and deadline, which the signer chose). */
const sameTerms = (signed: SignaturesRequest["terms"], expected: TermsMessage) =>
  signed.mandateId.toLowerCase() === expected.mandateId.toLowerCase() &&
  isAddress(signed.payee) &&
  signed.payee.toLowerCase() === expected.payee.toLowerCase() &&
  signed.token.toLowerCase() === expected.token.toLowerCase() &&
  BigInt(signed.cap) === expected.cap &&
  BigInt(signed.anchor) === expected.anchor &&
  Number(signed.approvalPeriods) === expected.approvalPeriods &&
  signed.operator.toLowerCase() === expected.operator.toLowerCase() &&
  BigInt(signed.holdSeconds) === expected.holdSeconds;

const make = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const tokenStates = yield* TokenStates;
  const clients = yield* ChainClients;
  const heads = yield* ChainHeads;
  const relayer = yield* Relayer;
  const store = yield* MandateStore;
  const gasCosts = yield* GasCosts;
  const tokens = yield* TokenReads;
  const limits = yield* AuthorizationLimits;
  const walletSignatures = yield* WalletSignatures;
  const walletDeployments = yield* WalletDeployments;

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
      .pipe(
        Effect.map((m) => BigInt((m as { nonce: bigint | number }).nonce)),
        Effect.mapError(unavailable),
      );

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
      cap: capToSign(mandate),
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
        return yield* refuse("nothing_to_sign", "This mandate is already signed; nothing is left to sign.");
    });

  /** The terms to sign and, for a token with permits, the permit; otherwise an approve when it is short. */
  const request = (mandate: MandateRow, customer: Hex, options: { readonly resign?: boolean } = {}) =>
    Effect.gen(function* () {
      const chain = yield* chainOfMandate(registry, mandate);
      yield* checkSigner(mandate, customer, options.resign ?? false);
      const token = mandate.token_address as Hex;
      const value = capToSign(mandate) * BigInt(mandate.approval_periods);
      const tokenState: Effect.Effect<TokenState, ChainUnavailable> = Effect.map(
        Effect.all(
          [
            tokens.allowance(chain, token, customer, chain.escrow.address),
            Effect.flatMap(tokens.permitDomain(chain, token), (domain) =>
              domain._tag === "Some"
                ? Effect.map(tokens.permitNonce(chain, token, customer), (nonce) => ({
                    domain: domain.value,
                    nonce,
                  }))
                : Effect.succeed(null),
            ),
          ],
          { concurrency: "unbounded" },
        ),
        ([allowance, permit]) => ({ allowance, permit }),
      );
      // Independent reads: one round trip of latency instead of three.
      const [onchain, latest, state] = yield* Effect.all(
        [
          onchainNonce(chain, onchainMandateId(customer, BigInt(mandate.salt))),
          heads.latestTime(chain).pipe(Effect.mapError(unavailable)),
          tokenState.pipe(Effect.mapError(unavailable)),
        ],
        { concurrency: "unbounded" },
      );
      const nonce = onchain + 1n;
      const deadline = latest + SIGNATURE_WINDOW_SECONDS;
      const message = expectedTerms(mandate, chain, customer, nonce, deadline);
      // An allowance that covers the approval needs neither (a wallet that approved the escrow itself: a
      // Safe with several signers, whose permit signature the escrow cannot take).
      let permit: TypedAuthorizationRequest["permit"] = null;
      let approve: AuthorizationRequest["approve"] = null;
      if (state.allowance >= value) {
        // Nothing to grant.
      } else if (state.permit !== null) {
        permit = {
          domain: state.permit.domain,
          message: {
            owner: customer,
            spender: chain.escrow.address,
            value,
            nonce: state.permit.nonce,
            deadline: BigInt(deadline),
          },
        };
      } else
        approve = {
          to: token,
          data: encodeFunctionData({
            abi: erc20Abi,
            functionName: "approve",
            args: [chain.escrow.address, value],
          }),
        };
      return {
        json: {
          terms: termsTypedDataJson(chain.id, chain.escrow.address, message),
          permit: permit && permitTypedDataJson(permit.domain, permit.message),
          approve,
        },
        terms: message,
        permit,
      } satisfies TypedAuthorizationRequest;
    });

  const checkTransactionLimit = (chain: ResolvedChain, onchainId: Hex) =>
    checkRelayedLimit(relayer, limits, chain, onchainId);

  /**
   * What the relayer checks before it sends anything for a mandate, in the sending database transaction:
   * the wallet is bound (or becomes bound) to it, under its row lock, then the day's limit.
   */
  const admitFor = (chain: ResolvedChain, mandate: MandateRow, customer: Hex, onchainId: Hex) =>
    Effect.gen(function* () {
      if (!(yield* store.bindWallet(mandate.id, customer, onchainId)))
        return yield* refuse(
          "wrong_account",
          "Another wallet signed this mandate first.",
          "customer_address",
        );
      // Under the mandate's row lock (taken by the binding): one decision per mandate at a time.
      yield* checkTransactionLimit(chain, onchainId);
    });

  /** The signatures as an item of the relayer's `authorizeMany` groups (with the permit, when there is one). */
  const authorizationItem = (expected: TermsMessage, input: SignaturesRequest): AuthorizationItem => {
    const permitSignature = input.permit_signature ?? null;
    const signature = input.signature as Hex;
    if (permitSignature === null) return { terms: expected, signature, permit: null };
    const { v, r, s, yParity } = parseSignature(permitSignature as Hex);
    const value = expected.cap * BigInt(expected.approvalPeriods);
    const permit = { value, deadline: expected.deadline, v: Number(v ?? BigInt(yParity + 27)), r, s };
    return { terms: expected, signature, permit };
  };

  /** The escrow call that records one item's signatures alone: what `/signatures` checks and measures. */
  const authorizeCall = ({ terms, signature, permit }: AuthorizationItem) =>
    permit === null
      ? { functionName: "authorize" as const, args: [terms, signature] }
      : {
          functionName: "authorizeWithPermit" as const,
          args: [terms, signature, permit.value, permit.deadline, permit.v, permit.r, permit.s],
        };

  /**
   * ERC-6492 signatures (a smart wallet not deployed yet): judged against the wallet the factory would
   * deploy, before anything is sent; the wallet is then bound to the mandate and deployed by the relayer
   * (counted against the mandate's daily limit), and the inner signatures go on like a deployed wallet's.
   * A wallet that has code by now needs no deployment: its wrappers are dropped, and the escrow's
   * simulation judges the signatures as for any deployed wallet (a stale permit nonce included).
   */
  const unwrapCounterfactual = (
    chain: ResolvedChain,
    mandate: MandateRow,
    customer: Hex,
    expected: TermsMessage,
    input: SignaturesRequest,
  ) =>
    Effect.gen(function* () {
      const signed: SignedHash[] = [
        {
          hash: hashTypedData({
            domain: termsDomain(chain.id, chain.escrow.address),
            types: TERMS_TYPES,
            primaryType: "Terms",
            message: expected,
          }),
          signature: input.signature as Hex,
          param: "signature",
          what: "these terms",
        },
      ];
      const permitSignature = input.permit_signature ?? null;
      if (permitSignature !== null) {
        const token = mandate.token_address as Hex;
        const [domain, nonce] = yield* Effect.all(
          [tokens.permitDomain(chain, token), tokens.permitNonce(chain, token, customer)],
          { concurrency: 2 },
        ).pipe(Effect.mapError(unavailable));
        if (domain._tag === "None")
          return yield* refuse("signature_invalid", "This token takes no permit.", "permit_signature");
        signed.push({
          hash: hashTypedData({
            domain: domain.value,
            types: PERMIT_TYPES,
            primaryType: "Permit",
            message: {
              owner: customer,
              spender: chain.escrow.address,
              value: expected.cap * BigInt(expected.approvalPeriods),
              nonce,
              deadline: expected.deadline,
            },
          }),
          signature: permitSignature as Hex,
          param: "permit_signature",
          what: "the permit",
        });
      }
      const checked = yield* walletSignatures.verify(chain, customer, signed, { unwrapOnly: true });
      if (checked.deployment !== null)
        yield* walletDeployments.deploy(chain, {
          address: customer,
          deployment: checked.deployment,
          action: `${authorizationPrefix(chain.id, expected.mandateId)}wallet`,
          source: { object: "mandate", id: mandate.id },
          merchantId: mandate.merchant_id,
          admit: admitFor(chain, mandate, customer, expected.mandateId),
        });
      return {
        ...input,
        signature: checked.signatures[0] ?? input.signature,
        permit_signature: checked.signatures[1] ?? permitSignature,
      };
    });

  /**
   * Verifies the signatures, binds the wallet and submits the authorization; returns the relayer purpose
   * and the mandate as bound (its wallet and on-chain id are what the binding wrote, or had written when
   * an earlier attempt answers this one), so the page's answer needs no second read.
   */
  const submit = (mandate: MandateRow, submitted: SignaturesRequest) =>
    Effect.gen(function* () {
      const chain = yield* chainOfMandate(registry, mandate);
      const customer = getAddress(submitted.customer_address);
      yield* checkSigner(mandate, customer, true);
      const nonce = BigInt(submitted.terms.nonce);
      const deadline = Number(submitted.terms.deadline);
      const expected = expectedTerms(mandate, chain, customer, nonce, deadline);
      if (!sameTerms(submitted.terms, expected))
        return yield* refuse(
          "terms_changed",
          "These are not the mandate's terms. Reload the page and sign again.",
          "terms",
        );
      const now = yield* heads.latestTime(chain).pipe(Effect.mapError(unavailable));
      if (deadline < now)
        return yield* refuse(
          "terms_expired",
          "The signature's deadline has passed. Sign the new terms.",
          "terms",
        );
      const input = [submitted.signature, submitted.permit_signature].some(
        (s) => typeof s === "string" && isErc6492Signature(s as Hex),
      )
        ? yield* unwrapCounterfactual(chain, mandate, customer, expected, submitted)
        : submitted;
      if (input.permit_signature != null && size(input.permit_signature as Hex) !== 65) {
        const token = tokenOf(chain, mandate.token_address);
        const approval = `${formatDecimal(expected.cap * BigInt(expected.approvalPeriods), token?.decimals ?? 0)} ${token?.symbol ?? "base units"}`;
        return yield* refuse(
          "permit_signature_unsupported",
          `The permit signature is ${size(input.permit_signature as Hex)} bytes; the escrow's permit takes a 65-byte one (v, r, s), which a wallet with several signers (a Safe with a threshold above 1) cannot give. Approve the escrow ${chain.escrow.address} for ${approval} from the wallet, then sign again: with that allowance in place only the terms are asked for.`,
          "permit_signature",
        );
      }
      const item = authorizationItem(expected, input);
      // A permit is a call of the token, which its issuer's pause refuses: 503, nothing sent.
      if (item.permit !== null) yield* tokenStates.guard(chain, mandate.token_address);
      const { functionName, args } = authorizeCall(item);
      const sender = relayer.address(chain.id);
      if (sender === undefined) return yield* relayerUnavailable("send transactions");
      // One run of the call checks the signature as the escrow will (an EOA's by recovery, a contract
      // wallet's by ERC-1271) and the nonce against the chain's, and gives the relayer its gas; only a
      // call that fails it costs the simulation that names the escrow's error. Recovering the signature
      // here as well cost the service 1.5 ms of CPU per authorisation (pure-JS secp256k1), and reading
      // the nonce first an RPC. At `latest`: nothing pending changes whether a signature holds, except
      // an earlier attempt of this same action, which the relayer answers instead of sending; and an
      // item the chain refuses after all is skipped alone.
      const measured = yield* clients
        .measureEscrow(chain, sender, functionName, args, "latest")
        .pipe(Effect.option);
      if (Option.isNone(measured)) {
        const refused = yield* clients
          .simulateOutcome(chain, sender, functionName, args)
          .pipe(Effect.mapError(unavailable));
        if (refused?.errorName === "InvalidSignature")
          return yield* refuse(
            "signature_invalid",
            "The signature does not match these terms and this wallet.",
            "signature",
          );
        if (refused?.errorName === "StaleNonce")
          return yield* refuse("terms_changed", "These terms were already signed. Reload the page.", "terms");
        if (refused !== undefined)
          return yield* refuse(
            "authorization_failed",
            authorizeFailure[refused.errorName] ??
              `The chain refused the authorization (${refused.errorName}).`,
          );
      }
      const action = authorizationAction(chain.id, expected.mandateId, nonce);
      const purpose = `${action}:${yield* newId("request")}`;
      const sent = yield* relayer
        .submitAuthorization(chain.id, {
          item,
          purpose,
          action,
          data: escrowCallData(functionName, args),
          gasUsed: Option.getOrUndefined(measured),
          merchant: mandate.merchant_id,
          // Inside the group's transaction, before the item is recorded.
          admit: Effect.andThen(
            admitFor(chain, mandate, customer, expected.mandateId),
            gasCosts.carries(chain.id, purpose, "authorization", "mandate", [mandate.id]),
          ),
        })
        .pipe(Effect.catchTag("RelayerError", (e) => Effect.fail(unavailable(e))));
      const bound: MandateRow = { ...mandate, customer_address: customer, onchain_id: expected.mandateId };
      return { purpose: sent.purpose, nonce, transaction: sent, mandate: bound };
    });

  return { request, submit };
});

export class Authorizations extends Context.Service<Authorizations>()("Authorizations", { make }) {
  static readonly layer = Layer.effect(Authorizations, make);
}
