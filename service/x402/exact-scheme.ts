/**
 * The `exact` scheme on EVM: an EIP-3009 transfer that pays one of the merchant's payments, whose
 * deposit address is `payTo`, through the pay page's gasless path (payments/gasless-payments.ts): its
 * checks, its bounds, its relayer. Settling waits up to `SETTLE_WAIT` for the transfer's block, then
 * answers `settlement_pending` with the transaction's hash; the same payload again (idempotent by the
 * authorization's nonce) waits for the same transaction.
 */
import { Effect, Option, Schema } from "effect";
import { getAddress, type Hex } from "viem";
import type { ResolvedChain } from "../chains/config.ts";
import { MerchantChains } from "../chains/merchant-chains.ts";
import { Relayer } from "../chains/relayer.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { GaslessPayments, gaslessPurpose } from "../payments/gasless-payments.ts";
import { PaySessions } from "../payments/pay-session.ts";
import { PaymentStore } from "../payments/payment-store.ts";
import { SETTLEMENT_PENDING } from "./reasons.ts";
import { refusal, refusedAs, sameAddress } from "./refusal.ts";
import { ExactEvmPayload, type SettleResponse, type X402Request } from "./wire.ts";

/** How long a settle waits for the transfer's block before it answers `settlement_pending`. */
const SETTLE_WAIT = "20 seconds";

const decodePayload = Schema.decodeUnknownOption(ExactEvmPayload);

export const makeExactScheme = Effect.gen(function* () {
  const store = yield* PaymentStore;
  const sessions = yield* PaySessions;
  const gasless = yield* GaslessPayments;
  const relayer = yield* Relayer;
  const merchantChains = yield* MerchantChains;

  /** The payment `payTo` names, and the authorization as the pay page takes it. */
  const resolve = (scope: MerchantScope, chain: ResolvedChain, request: X402Request) =>
    Effect.gen(function* () {
      const required = request.paymentRequirements;
      const exact = decodePayload(request.paymentPayload.payload);
      if (Option.isNone(exact))
        return yield* refusal(
          "invalid_payload",
          "The payload is not an EIP-3009 authorization: { signature, authorization: { from, to, value, validAfter, validBefore, nonce } }.",
        );
      const { authorization, signature } = exact.value;
      const payer = getAddress(authorization.from);
      if (!sameAddress(authorization.to, required.payTo))
        return yield* refusal(
          "invalid_exact_evm_payload_recipient_mismatch",
          "The authorization pays another address than payTo.",
          payer,
        );
      if (
        !/^(0|[1-9]\d{0,77})$/.test(required.amount) ||
        BigInt(authorization.value) !== BigInt(required.amount)
      )
        return yield* refusal(
          "invalid_exact_evm_payload_authorization_value_mismatch",
          `The authorization moves ${authorization.value} base units; the requirements ask exactly ${required.amount}.`,
          payer,
        );
      const payment = yield* store.byDeposit(scope, chain.id, required.payTo);
      if (payment === undefined) {
        const payout = (yield* merchantChains.list(scope)).find((c) => c.chain === chain.id)?.payout_address;
        return yield* refusal(
          "invalid_payment_requirements",
          payout !== undefined && sameAddress(payout, required.payTo)
            ? `payTo is your payout address: x402 transfers pay one of your payments, at its deposit_address, so that the money moves through the escrow. To charge per request, use the mandate scheme (docs/x402.md).`
            : `payTo must be the deposit_address of one of your payments on ${required.network}; ${required.payTo} is not.`,
          payer,
        );
      }
      if (!sameAddress(payment.token_address, required.asset))
        return yield* refusal(
          "invalid_payment_requirements",
          `The payment ${payment.id} is paid in the token ${payment.token_address}, not ${required.asset}.`,
          payer,
        );
      const domain = yield* sessions.gaslessDomain(chain, payment.token_address as Hex);
      const extra = required.extra ?? {};
      if (
        Option.isSome(domain) &&
        ((extra.name !== undefined && extra.name !== domain.value.name) ||
          (extra.version !== undefined && extra.version !== domain.value.version))
      )
        return yield* refusal(
          "invalid_payment_requirements",
          `The token's EIP-712 domain is { name: "${domain.value.name}", version: "${domain.value.version}" }; extra says otherwise.`,
          payer,
        );
      return {
        payer,
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
      };
    });

  const verify = (scope: MerchantScope, chain: ResolvedChain, request: X402Request) =>
    Effect.gen(function* () {
      const { payer, payment, authorization } = yield* resolve(scope, chain, request);
      yield* gasless
        .verify(payment, authorization)
        .pipe(Effect.catchTag("InvalidRequest", refusedAs("verify", "exact", payer)));
      return payer;
    });

  const settle = (scope: MerchantScope, chain: ResolvedChain, request: X402Request) =>
    Effect.gen(function* () {
      const { payer, payment, authorization } = yield* resolve(scope, chain, request);
      const purpose = gaslessPurpose(chain.id, payment.id, authorization.from, authorization.nonce);
      const sent = yield* gasless
        .submit(payment, authorization)
        .pipe(Effect.catchTag("InvalidRequest", refusedAs("settle", "exact", payer)));
      const settled = {
        payer,
        network: request.paymentRequirements.network,
        amount: authorization.value,
        extra: { payment: payment.id },
      };
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

  return { verify, settle };
});
