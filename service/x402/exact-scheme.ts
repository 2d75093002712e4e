/**
 * The `exact` scheme on EVM: an EIP-3009 transfer that pays one of the merchant's payments, whose
 * deposit address is `payTo`, through the pay page's gasless path (payments/gasless-payments.ts): its
 * checks, its bounds, its relayer. The payment is one the merchant created, or one made per request
 * (`extra.escrowPaymentId`, client/x402-deposits.ts) and recorded at settle. Settling waits up to `SETTLE_WAIT` for the transfer's block, then
 * answers `settlement_pending` with the transaction's hash; the same payload again (idempotent by the
 * authorization's nonce) waits for the same transaction.
 */
import { Effect, Option, Schema } from "effect";
import { getAddress, type Hex } from "viem";
import type { ResolvedChain } from "../chains/config.ts";
import { MerchantChains } from "../chains/merchant-chains.ts";
import { Relayer } from "../chains/relayer.ts";
import { InvalidRequest } from "../errors.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import {
  GaslessPayments,
  gaslessPurpose,
  type PayableRow,
  payableDraft,
} from "../payments/gasless-payments.ts";
import { PaySessions } from "../payments/pay-session.ts";
import type { PaymentRow } from "../payments/payment-object.ts";
import { PaymentStore } from "../payments/payment-store.ts";
import { type DepositPaymentInput, Payments } from "../payments/payments.ts";
import { SETTLEMENT_PENDING } from "./reasons.ts";
import { refusal, refusedAs, refusedRequirements, sameAddress } from "./refusal.ts";
import { ExactEvmPayload, type SettleResponse, type X402Request } from "./wire.ts";

/** How long a settle waits for the transfer's block before it answers `settlement_pending`. */
const SETTLE_WAIT = "20 seconds";

const decodePayload = Schema.decodeUnknownOption(ExactEvmPayload);

/** The payment `payTo` pays: recorded, or made per request and recorded at settle. */
type Target =
  | { readonly recorded: PaymentRow }
  | { readonly draft: PayableRow; readonly input: DepositPaymentInput };
const payableOf = (target: Target): PayableRow => ("recorded" in target ? target.recorded : target.draft);

export const makeExactScheme = Effect.gen(function* () {
  const store = yield* PaymentStore;
  const sessions = yield* PaySessions;
  const gasless = yield* GaslessPayments;
  const relayer = yield* Relayer;
  const merchantChains = yield* MerchantChains;
  const payments = yield* Payments;

  /**
   * A `payTo` made per request (client/x402-deposits.ts): the deposit address of a payment not recorded
   * yet, whose escrow id `extra.escrowPaymentId` names. It is one of this merchant's only if the escrow's
   * terms with that id, the merchant's payout address, the token, our operator and the chain's hold give
   * it; the payment is recorded at settle.
   */
  const draftOf = (scope: MerchantScope, chain: ResolvedChain, request: X402Request, payer: string) =>
    Effect.gen(function* () {
      const required = request.paymentRequirements;
      const escrowPaymentId = required.extra?.escrowPaymentId;
      if (typeof escrowPaymentId !== "string" || !/^0x[0-9a-fA-F]{64}$/.test(escrowPaymentId)) {
        const payout = (yield* merchantChains.list(scope)).find((c) => c.chain === chain.id)?.payout_address;
        return yield* refusal(
          "invalid_payment_requirements",
          payout !== undefined && sameAddress(payout, required.payTo)
            ? `payTo is your payout address: x402 transfers pay a deposit address, so that the money moves through the escrow. Make payTo per request with extra.escrowPaymentId (client/x402-deposits.ts), or use one of your payments' deposit_address (docs/x402.md).`
            : `payTo must be the deposit_address of one of your payments on ${required.network}, or one made per request with extra.escrowPaymentId (docs/x402.md); ${required.payTo} is neither.`,
          payer,
        );
      }
      const resource = request.paymentPayload.resource;
      const url =
        typeof resource === "object" &&
        resource !== null &&
        "url" in resource &&
        typeof resource.url === "string"
          ? resource.url
          : undefined;
      const input: DepositPaymentInput = {
        token: required.asset,
        paymentId: escrowPaymentId.toLowerCase() as Hex,
        depositAddress: required.payTo,
        amount: BigInt(required.amount),
        description: url === undefined ? null : `x402: ${url}`.slice(0, 500),
      };
      const drafted = yield* payments
        .draftAtDeposit(scope, chain, input)
        .pipe(Effect.catchTag("InvalidRequest", refusedRequirements(payer)));
      if (drafted === undefined)
        return yield* refusal(
          "invalid_payment_requirements",
          `payTo is not the deposit address that extra.escrowPaymentId gives with your payout address on ${required.network}, this token and the escrow's terms here (GET /x402/supported lists them).`,
          payer,
        );
      return { draft: payableDraft(drafted), input } satisfies Target;
    });

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
      const recorded = yield* store.byDeposit(scope, chain.id, required.payTo);
      const target: Target =
        recorded !== undefined ? { recorded } : yield* draftOf(scope, chain, request, payer);
      const payment = payableOf(target);
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
        target,
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
      const { payer, target, authorization } = yield* resolve(scope, chain, request);
      yield* gasless
        .verify(payableOf(target), authorization)
        .pipe(Effect.catchTag("InvalidRequest", refusedAs("verify", "exact", payer)));
      return payer;
    });

  /**
   * A payment made per request is recorded once its authorization passes every check, so that a payload
   * that would be refused leaves nothing behind. A concurrent settle of the same `payTo` finds it made.
   */
  const record = (
    scope: MerchantScope,
    chain: ResolvedChain,
    payer: string,
    { draft, input }: Extract<Target, { draft: PayableRow }>,
    authorization: Effect.Success<ReturnType<typeof resolve>>["authorization"],
  ) =>
    Effect.gen(function* () {
      const refused = yield* gasless
        .verify(draft, authorization)
        .pipe(Effect.as(undefined), Effect.catchTag("InvalidRequest", Effect.succeed));
      if (refused !== undefined) {
        // The same payload settled at the same time may have recorded the payment and sent this transfer.
        const recorded = yield* store.byDeposit(scope, chain.id, input.depositAddress);
        if (recorded !== undefined) return recorded;
        // Or the authorization reached the token another way: its money is at payTo, watched from now.
        const arrived =
          refused.code === "authorization_used"
            ? yield* payments
                .openArrived(scope, chain, input)
                .pipe(Effect.catchTag("InvalidRequest", () => Effect.succeed(undefined)))
            : undefined;
        return yield* refusedAs(
          "settle",
          "exact",
          payer,
        )(
          arrived === undefined
            ? refused
            : new InvalidRequest({
                code: refused.code,
                param: refused.param,
                message: `${refused.message} It was sent to the token without this facilitator; ${arrived.id} is recorded for payTo and is paid from the transfer there.`,
              }),
        );
      }
      const payment = yield* payments
        .openAtDeposit(scope, chain, input)
        .pipe(Effect.catchTag("InvalidRequest", refusedRequirements(payer)));
      if (payment === undefined)
        return yield* refusal(
          "invalid_payment_requirements",
          `payTo ${input.depositAddress} is another account's.`,
          payer,
        );
      return payment;
    });

  const settle = (scope: MerchantScope, chain: ResolvedChain, request: X402Request) =>
    Effect.gen(function* () {
      const { payer, target, authorization } = yield* resolve(scope, chain, request);
      const payment =
        "recorded" in target ? target.recorded : yield* record(scope, chain, payer, target, authorization);
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
