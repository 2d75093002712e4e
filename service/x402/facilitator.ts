/**
 * An x402 facilitator for the merchant's own resource servers (x402-specification-v2.md §7): verify and
 * settle the `exact` scheme's EIP-3009 transfer on EVM chains, through the pay page's gasless path.
 *
 * `payTo` is the deposit address of one of the merchant's payments: the transfer pays that payment, as
 * a signed transfer on its pay page would, with the same checks (signature of a key, an ERC-1271
 * wallet or an ERC-6492 counterfactual one, balance less the payer's transfers in flight, nonce,
 * validity window in chain time, a simulation) and the same bounds (one transfer in flight per payer
 * and token, the payer's cooling-off after a revert, the merchant's share of the relayer's budget).
 * The payment then becomes `paid` from chain facts like any other, with `payment.paid`.
 *
 * x402 checks come first: version 2, scheme `exact`, a network the merchant has configured for
 * payments, `accepted` equal to the requirements, the authorization's recipient and value equal to
 * `payTo` and `amount` (exactly), the token's EIP-712 domain equal to `extra`. A refusal is an answer
 * (`isValid: false`, `success: false`) with the specification's reason; a chain or the database that does
 * not answer, or a limit reached, is an HTTP error (503, 429) the caller retries.
 *
 * Settling sends the transfer and waits up to `SETTLE_WAIT` for its block; longer, the answer is
 * `settlement_pending` with the transaction's hash, and settling the same payload again (idempotent by
 * the authorization's nonce: the relayer's purpose) waits for the same transaction.
 */
import { Context, Data, Effect, Layer, Option, Schema } from "effect";
import { getAddress, type Hex, isAddressEqual } from "viem";
import type { ResolvedChain } from "../chains/config.ts";
import { MerchantChains } from "../chains/merchant-chains.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import type { InvalidRequest } from "../errors.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import {
  GaslessPayments,
  gaslessPurpose,
  type PayAuthorizationRequest,
} from "../payments/gasless-payments.ts";
import { PaySessions } from "../payments/pay-session.ts";
import type { PaymentRow } from "../payments/payment-object.ts";
import { PaymentStore } from "../payments/payment-store.ts";
import { reasonOf, SETTLEMENT_PENDING, type X402Reason } from "./reasons.ts";
import {
  ExactEvmPayload,
  type SettleResponse,
  type SupportedResponse,
  type VerifyResponse,
  type X402Request,
} from "./wire.ts";

/** How long a settle waits for the transfer's block before it answers `settlement_pending`. */
const SETTLE_WAIT = "20 seconds";

/** A request x402 refuses, with the specification's reason. */
class X402Refusal extends Data.TaggedError("X402Refusal")<{
  readonly reason: X402Reason;
  readonly message: string;
  readonly payer?: string;
}> {}

const refusal = (reason: X402Reason, message: string) => new X402Refusal({ reason, message });

const networkOf = (chainId: number) => `eip155:${chainId}`;

const decodeExactPayload = Schema.decodeUnknownOption(ExactEvmPayload);

/** What an x402 request pays: the payment, its chain, and the authorization as the pay page takes it. */
interface Resolved {
  readonly chain: ResolvedChain;
  readonly payment: PaymentRow;
  readonly authorization: PayAuthorizationRequest;
}

const make = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const merchantChains = yield* MerchantChains;
  const store = yield* PaymentStore;
  const sessions = yield* PaySessions;
  const gasless = yield* GaslessPayments;
  const relayer = yield* Relayer;

  /** The merchant's chains that take payments, in its mode. */
  const paymentChains = (scope: MerchantScope) =>
    merchantChains
      .list(scope)
      .pipe(
        Effect.map((configured) =>
          configured.filter((c) => c.payments_available && c.livemode === scope.livemode).map((c) => c.chain),
        ),
      );

  const supported = (scope: MerchantScope) =>
    Effect.gen(function* () {
      const chains = yield* paymentChains(scope);
      const signers = [
        ...new Set(chains.flatMap((id) => Option.fromNullishOr(relayer.address(id)).pipe(Option.toArray))),
      ];
      const answer: SupportedResponse = {
        kinds: chains.map((id) => ({ x402Version: 2, scheme: "exact", network: networkOf(id) })),
        extensions: [],
        signers: signers.length === 0 ? {} : { "eip155:*": signers },
      };
      return answer;
    });

  /** The x402 checks, and the payment the request pays. */
  const resolve = (scope: MerchantScope, request: X402Request) =>
    Effect.gen(function* () {
      const { paymentPayload: payload, paymentRequirements: required } = request;
      if (request.x402Version !== 2 || payload.x402Version !== 2)
        return yield* refusal("invalid_x402_version", "This facilitator speaks x402 version 2.");
      if (required.scheme !== "exact" || payload.accepted.scheme !== "exact")
        return yield* refusal(
          "unsupported_scheme",
          `This facilitator settles the "exact" scheme, not "${required.scheme}".`,
        );
      const chainId = /^eip155:([1-9]\d{0,15})$/.exec(required.network)?.[1];
      const chain = chainId === undefined ? undefined : registry.find(Number(chainId), scope.livemode);
      if (chain === undefined || !(yield* paymentChains(scope)).includes(chain.id))
        return yield* refusal(
          "invalid_network",
          `${required.network} is not one of your chains that take payments (GET /x402/supported lists them).`,
        );
      const accepted = payload.accepted;
      const sameAddress = (a: string, b: string) =>
        /^0x[0-9a-fA-F]{40}$/.test(a) && /^0x[0-9a-fA-F]{40}$/.test(b) && isAddressEqual(a as Hex, b as Hex);
      if (
        accepted.network !== required.network ||
        accepted.amount !== required.amount ||
        !sameAddress(accepted.asset, required.asset) ||
        !sameAddress(accepted.payTo, required.payTo)
      )
        return yield* refusal(
          "invalid_payment_requirements",
          "The payload accepted other requirements (network, amount, asset or payTo) than these.",
        );
      const exact = decodeExactPayload(payload.payload);
      if (Option.isNone(exact))
        return yield* refusal(
          "invalid_payload",
          "The payload is not an EIP-3009 authorization: { signature, authorization: { from, to, value, validAfter, validBefore, nonce } }.",
        );
      const { authorization, signature } = exact.value;
      const payer = getAddress(authorization.from);
      const refuse = (reason: X402Reason, message: string) => new X402Refusal({ reason, message, payer });
      if (!sameAddress(authorization.to, required.payTo))
        return yield* refuse(
          "invalid_exact_evm_payload_recipient_mismatch",
          "The authorization pays another address than payTo.",
        );
      if (
        !/^(0|[1-9]\d{0,77})$/.test(required.amount) ||
        BigInt(authorization.value) !== BigInt(required.amount)
      )
        return yield* refuse(
          "invalid_exact_evm_payload_authorization_value_mismatch",
          `The authorization moves ${authorization.value} base units; the requirements ask exactly ${required.amount}.`,
        );
      const payment = yield* store.byDeposit(scope, chain.id, required.payTo);
      if (payment === undefined)
        return yield* refuse(
          "invalid_payment_requirements",
          `payTo must be the deposit_address of one of your payments on ${required.network}; ${required.payTo} is not.`,
        );
      if (!sameAddress(payment.token_address, required.asset))
        return yield* refuse(
          "invalid_payment_requirements",
          `The payment ${payment.id} is paid in the token ${payment.token_address}, not ${required.asset}.`,
        );
      const domain = yield* sessions.gaslessDomain(chain, payment.token_address as Hex);
      const extra = required.extra ?? {};
      if (
        Option.isSome(domain) &&
        ((extra.name !== undefined && extra.name !== domain.value.name) ||
          (extra.version !== undefined && extra.version !== domain.value.version))
      )
        return yield* refuse(
          "invalid_payment_requirements",
          `The token's EIP-712 domain is { name: "${domain.value.name}", version: "${domain.value.version}" }; extra says otherwise.`,
        );
      return {
        chain,
        payment,
        authorization: {
          from: authorization.from,
          to: authorization.to,
          value: authorization.value,
          valid_after: authorization.validAfter,
          valid_before: authorization.validBefore,
          nonce: authorization.nonce,
          signature,
        },
      } satisfies Resolved;
    });

  /** One of the pay page's refusals, as x402's. */
  const refusedAs =
    (phase: "verify" | "settle", payer: string | undefined) =>
    (error: InvalidRequest): X402Refusal =>
      new X402Refusal({
        reason: reasonOf(error.code, phase),
        message: `${error.code}: ${error.message}`,
        ...(payer === undefined ? {} : { payer }),
      });

  const verify = (scope: MerchantScope, request: X402Request) =>
    Effect.gen(function* () {
      const { payment, authorization } = yield* resolve(scope, request);
      const payer = getAddress(authorization.from);
      yield* gasless
        .verify(payment, authorization)
        .pipe(Effect.mapError((e) => (e._tag === "InvalidRequest" ? refusedAs("verify", payer)(e) : e)));
      return { isValid: true, payer } satisfies VerifyResponse;
    }).pipe(
      Effect.catchTag("X402Refusal", (refused) =>
        Effect.succeed({
          isValid: false,
          invalidReason: refused.reason,
          invalidMessage: refused.message,
          ...(refused.payer === undefined ? {} : { payer: refused.payer }),
        } satisfies VerifyResponse),
      ),
    );

  const settle = (scope: MerchantScope, request: X402Request) =>
    Effect.gen(function* () {
      const network = request.paymentRequirements.network;
      const answer = Effect.gen(function* () {
        const { chain, payment, authorization } = yield* resolve(scope, request);
        const payer = getAddress(authorization.from);
        const purpose = gaslessPurpose(chain.id, payment.id, authorization.from, authorization.nonce);
        const sent = yield* gasless
          .submit(payment, authorization)
          .pipe(Effect.mapError((e) => (e._tag === "InvalidRequest" ? refusedAs("settle", payer)(e) : e)));
        const settled = { payer, network, amount: authorization.value, extra: { payment: payment.id } };
        // Another authorization's transfer is paying this payment already: this one is not sent.
        if (sent.purpose !== purpose)
          return {
            ...settled,
            success: false,
            errorReason: "invalid_transaction_state",
            errorMessage: `payment_not_payable: another transfer (${sent.hash}) is paying ${payment.id}; this authorization was not sent.`,
            transaction: "",
          } satisfies SettleResponse;
        const mined = yield* relayer.waitMined(chain.id, purpose, SETTLE_WAIT);
        if (mined === undefined)
          return {
            ...settled,
            success: false,
            errorReason: SETTLEMENT_PENDING,
            errorMessage: `The transfer is sent and not in a block after ${SETTLE_WAIT}; settle again to wait for it.`,
            transaction: sent.hash,
          } satisfies SettleResponse;
        if (mined.status === "reverted")
          return {
            ...settled,
            success: false,
            errorReason: "invalid_transaction_state",
            errorMessage: `The transfer ${mined.hash} reverted.`,
            transaction: mined.hash,
          } satisfies SettleResponse;
        return { ...settled, success: true, transaction: mined.hash } satisfies SettleResponse;
      });
      return yield* answer.pipe(
        Effect.catchTag("X402Refusal", (refused) =>
          Effect.succeed({
            success: false,
            errorReason: refused.reason,
            errorMessage: refused.message,
            ...(refused.payer === undefined ? {} : { payer: refused.payer }),
            transaction: "",
            network,
          } satisfies SettleResponse),
        ),
      );
    });

  return { supported, verify, settle };
});

export class X402Facilitator extends Context.Service<X402Facilitator>()("X402Facilitator", { make }) {
  static readonly layer = Layer.effect(X402Facilitator, make);
}
