/**
 * The `mandate` scheme (ours, docs/x402.md): a client whose wallet authorized a metered subscription's
 * mandate once pays each request by signing a `MandateUsage` (x402/mandate-usage.ts) instead of a
 * transfer. Settling records the amount as the subscription's usage (subscriptions/usage.ts), once per
 * nonce, and nothing moves on chain then: the period's usage is charged with the next invoice, one
 * charge per period, never above the mandate's cap. A payment that would take that charge above the
 * cap is refused (`mandate_cap_exceeded`), and the client gets a 402 that says so.
 */
import { Effect, Option, Schema } from "effect";
import { SqlClient } from "effect/sql";
import { getAddress, type Hex, hashTypedData } from "viem";
import { ChainHeads } from "../chains/chain-heads.ts";
import type { ResolvedChain } from "../chains/config.ts";
import { unavailable } from "../chains/unavailable.ts";
import { WalletSignatures } from "../chains/wallet-signatures.ts";
import { MandateStore } from "../mandates/mandate-store.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { SubscriptionStore } from "../subscriptions/subscription-store.ts";
import { Usage } from "../subscriptions/usage.ts";
import { UsageStore } from "../subscriptions/usage-store.ts";
import { mandateUsageTypedData } from "./mandate-usage.ts";
import { refusal, refusedAs, sameAddress } from "./refusal.ts";
import { MandatePayload, type SettleResponse, type X402Request } from "./wire.ts";

const decodePayload = Schema.decodeUnknownOption(MandatePayload);

export const makeMandateScheme = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient;
  const subscriptions = yield* SubscriptionStore;
  const mandates = yield* MandateStore;
  const usage = yield* Usage;
  const usageRecords = yield* UsageStore;
  const heads = yield* ChainHeads;
  const walletSignatures = yield* WalletSignatures;

  /** The subscription the payload names, its customer's signature checked, and what it pays. */
  const resolve = (
    scope: MerchantScope,
    chain: ResolvedChain,
    request: X402Request,
    phase: "verify" | "settle",
  ) =>
    Effect.gen(function* () {
      const required = request.paymentRequirements;
      const decoded = decodePayload(request.paymentPayload.payload);
      if (Option.isNone(decoded) || !/^[1-9]\d{0,77}$/.test(required.amount))
        return yield* refusal(
          "invalid_payload",
          "The mandate scheme's payload is { subscription, nonce, validBefore, signature }, for a positive amount.",
        );
      const { subscription: subscriptionId, nonce, validBefore, signature } = decoded.value;
      const subscription = yield* subscriptions
        .load(scope, subscriptionId)
        .pipe(
          Effect.catchTag("NotFound", () =>
            Effect.fail(refusal("invalid_payload", `No subscription ${subscriptionId} of yours.`)),
          ),
        );
      if (subscription.chain_id !== chain.id || !sameAddress(subscription.token_address, required.asset))
        return yield* refusal(
          "invalid_payment_requirements",
          `Subscription ${subscription.id} is paid in ${subscription.token_address} on eip155:${subscription.chain_id}, not as these requirements say.`,
        );
      const mandate = yield* mandates.load(scope, subscription.mandate_id);
      if (!sameAddress(mandate.payee_address, required.payTo))
        return yield* refusal(
          "invalid_payment_requirements",
          `payTo must be the payout address the subscription's mandate pays, ${mandate.payee_address}.`,
        );
      if (mandate.status !== "active" || mandate.customer_address === null)
        return yield* refusal(
          "mandate_not_billing",
          `The mandate ${mandate.id} of subscription ${subscription.id} is ${mandate.status}: its customer signs it first.`,
        );
      const payer = getAddress(mandate.customer_address);
      const now = yield* heads.latestTime(chain).pipe(Effect.mapError(unavailable));
      if (BigInt(validBefore) < BigInt(now))
        return yield* refusal("mandate_usage_expired", "The signed payment's validBefore has passed.", payer);
      const amount = BigInt(required.amount);
      const checked = yield* walletSignatures
        .verify(chain, payer, [
          {
            hash: hashTypedData(
              mandateUsageTypedData(chain.id, {
                subscription: subscription.id,
                payTo: getAddress(required.payTo),
                asset: getAddress(required.asset),
                amount,
                nonce: nonce.toLowerCase() as Hex,
                validBefore: BigInt(validBefore),
              }),
            ),
            signature: signature as Hex,
            param: "signature",
            what: "this payment (EIP-712 MandateUsage)",
          },
        ])
        .pipe(Effect.catchTag("InvalidRequest", refusedAs(phase, "mandate", payer)));
      if (checked.deployment !== null)
        return yield* refusal(
          "invalid_mandate_signature",
          "The customer's wallet signs as a deployed wallet: it authorized the mandate already.",
          payer,
        );
      return { payer, subscription, amount, nonce: nonce.toLowerCase() };
    });

  const verify = (scope: MerchantScope, chain: ResolvedChain, request: X402Request) =>
    Effect.gen(function* () {
      const { payer, subscription, amount, nonce } = yield* resolve(scope, chain, request, "verify");
      if ((yield* usageRecords.byX402Nonce(subscription.id, nonce)) !== undefined)
        return yield* refusal(
          "invalid_transaction_state",
          "This payment's nonce was settled already.",
          payer,
        );
      yield* usage
        .assessPaid(scope, subscription.id, amount)
        .pipe(Effect.catchTag("InvalidRequest", refusedAs("verify", "mandate", payer)));
      return payer;
    });

  const settle = (scope: MerchantScope, chain: ResolvedChain, request: X402Request) =>
    Effect.gen(function* () {
      const { payer, subscription, amount, nonce } = yield* resolve(scope, chain, request, "settle");
      const recorded = yield* sql
        .withTransaction(usage.recordPaid(scope, subscription.id, amount, nonce))
        .pipe(Effect.catchTag("InvalidRequest", refusedAs("settle", "mandate", payer)));
      return {
        success: true,
        payer,
        network: request.paymentRequirements.network,
        amount: amount.toString(),
        transaction: recorded.id,
        extra: { usage_record: recorded.id, subscription: subscription.id, period: recorded.period },
      } satisfies SettleResponse;
    });

  return { verify, settle };
});
