/**
 * An x402 facilitator for the merchant's own resource servers (x402-specification-v2.md §7), at
 * `/x402` with the merchant's key, for two schemes on EVM chains:
 * - `exact` (x402/exact-scheme.ts): an EIP-3009 transfer that pays one of the merchant's payments;
 * - `mandate` (x402/mandate-scheme.ts, ours): usage of a metered subscription whose mandate the client's
 *   wallet authorized once, signed per request and charged with the next invoice.
 *
 * The checks common to both come first: version 2, a scheme it settles, a network the merchant has
 * configured for it (payments for `exact`, subscriptions for `mandate`), and `accepted` equal to the
 * requirements. A refusal is an answer (`isValid: false`, `success: false`) with x402's reason and this
 * API's code and message; a chain or the database that does not answer, or a limit reached, is an HTTP
 * error (503, 429) the caller retries.
 */
import { Context, Effect, Layer } from "effect";
import type { ResolvedChain } from "../chains/config.ts";
import { MerchantChains } from "../chains/merchant-chains.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { Payments } from "../payments/payments.ts";
import { makeExactScheme } from "./exact-scheme.ts";
import { makeMandateScheme } from "./mandate-scheme.ts";
import { MANDATE_SCHEME } from "./mandate-usage.ts";
import { refusal, sameAddress, type X402Refusal } from "./refusal.ts";
import type { SettleResponse, SupportedResponse, VerifyResponse, X402Request } from "./wire.ts";

const networkOf = (chainId: number) => `eip155:${chainId}`;

type Scheme = "exact" | typeof MANDATE_SCHEME;

const make = Effect.gen(function* () {
  const registry = yield* ChainRegistry;
  const merchantChains = yield* MerchantChains;
  const relayer = yield* Relayer;
  const payments = yield* Payments;
  const schemes = { exact: yield* makeExactScheme, [MANDATE_SCHEME]: yield* makeMandateScheme };

  /** The merchant's chains of its mode, each with the schemes it settles there. */
  const kindsOf = (scope: MerchantScope) =>
    Effect.map(merchantChains.list(scope), (configured) =>
      configured
        .filter((c) => c.livemode === scope.livemode)
        .flatMap((c) => [
          ...(c.payments_available ? [{ chain: c.chain, scheme: "exact" as Scheme }] : []),
          ...(c.subscriptions_available ? [{ chain: c.chain, scheme: MANDATE_SCHEME as Scheme }] : []),
        ]),
    );

  const supported = (scope: MerchantScope) =>
    Effect.gen(function* () {
      const kinds = yield* kindsOf(scope);
      const signers = [
        ...new Set(
          kinds.flatMap(({ chain, scheme }) => {
            const address = scheme === "exact" ? relayer.address(chain) : undefined;
            return address === undefined ? [] : [address];
          }),
        ),
      ];
      const answer: SupportedResponse = {
        kinds: yield* Effect.forEach(kinds, ({ chain, scheme }) =>
          Effect.gen(function* () {
            const kind = { x402Version: 2, scheme, network: networkOf(chain) };
            const resolved = registry.byId(chain);
            const terms =
              scheme === "exact" && resolved !== undefined
                ? yield* payments.depositParameters(scope, resolved)
                : undefined;
            return terms === undefined
              ? kind
              : {
                  ...kind,
                  extra: {
                    depositTerms: {
                      escrow: terms.escrow,
                      payee: terms.payee,
                      operator: terms.operator,
                      holdSeconds: Number(terms.holdSeconds),
                    },
                  },
                };
          }),
        ),
        extensions: [],
        signers: signers.length === 0 ? {} : { "eip155:*": signers },
      };
      return answer;
    });

  /** The checks common to both schemes: the scheme and the chain the request is for. */
  const route = (scope: MerchantScope, request: X402Request) =>
    Effect.gen(function* () {
      const { paymentPayload: payload, paymentRequirements: required } = request;
      if (request.x402Version !== 2 || payload.x402Version !== 2)
        return yield* refusal("invalid_x402_version", "This facilitator speaks x402 version 2.");
      const scheme = required.scheme;
      if ((scheme !== "exact" && scheme !== MANDATE_SCHEME) || payload.accepted.scheme !== scheme)
        return yield* refusal(
          "unsupported_scheme",
          `This facilitator settles the "exact" and "${MANDATE_SCHEME}" schemes, not "${required.scheme}".`,
        );
      const chainId = /^eip155:([1-9]\d{0,15})$/.exec(required.network)?.[1];
      const chain: ResolvedChain | undefined =
        chainId === undefined ? undefined : registry.find(Number(chainId), scope.livemode);
      const kinds = yield* kindsOf(scope);
      if (chain === undefined || !kinds.some((k) => k.chain === chain.id && k.scheme === scheme))
        return yield* refusal(
          "invalid_network",
          `${required.network} is not one of your chains for the "${scheme}" scheme (GET /x402/supported lists them).`,
        );
      const accepted = payload.accepted;
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
      return { scheme: schemes[scheme], chain };
    });

  const invalid = (refused: X402Refusal): VerifyResponse => ({
    isValid: false,
    invalidReason: refused.reason,
    invalidMessage: refused.message,
    ...(refused.payer === undefined ? {} : { payer: refused.payer }),
  });

  const verify = (scope: MerchantScope, request: X402Request) =>
    Effect.gen(function* () {
      const { scheme, chain } = yield* route(scope, request);
      const payer = yield* scheme.verify(scope, chain, request);
      return { isValid: true, payer } satisfies VerifyResponse;
    }).pipe(Effect.catchTag("X402Refusal", (refused) => Effect.succeed(invalid(refused))));

  const settle = (scope: MerchantScope, request: X402Request) =>
    Effect.gen(function* () {
      const { scheme, chain } = yield* route(scope, request);
      return yield* scheme.settle(scope, chain, request);
    }).pipe(
      Effect.catchTag("X402Refusal", (refused) =>
        Effect.succeed({
          success: false,
          errorReason: refused.reason,
          errorMessage: refused.message,
          ...(refused.payer === undefined ? {} : { payer: refused.payer }),
          transaction: "",
          network: request.paymentRequirements.network,
        } satisfies SettleResponse),
      ),
    );

  return { supported, verify, settle };
});

export class X402Facilitator extends Context.Service<X402Facilitator>()("X402Facilitator", { make }) {
  static readonly layer = Layer.effect(X402Facilitator, make);
}
