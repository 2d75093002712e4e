/**
 * Test-mode helpers (test keys only): fund a mandate's vault with test tokens, sign a mandate as the
 * customer with a deterministic test wallet, and move a local test chain's clock. They go through the
 * same paths as real customers and the real chain: `mandate.authorized` comes from the indexed chain
 * event, and billing time is chain time, so advancing the clock moves periods and holds. A helper that
 * must answer after mining (fund, authorize) commits its relayer transaction on a connection of its own
 * (`outsideTransaction`, db/client.ts) and waits for the receipt, then (authorize) for the fact relay to
 * apply the `MandateAuthorized` fact.
 */
import { Context, Duration, Effect, Layer, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import type { Hex } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { chooseChain } from "../chains/chain-choice.ts";
import { ChainClients } from "../chains/chain-clients.ts";
import { ChainHeads } from "../chains/chain-heads.ts";
import { tokenOf } from "../chains/config.ts";
import { GasCosts } from "../chains/gas-costs.ts";
import { MerchantChains } from "../chains/merchant-chains.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { TokenStates } from "../chains/token-states.ts";
import { outsideTransaction } from "../db/client.ts";
import { InvalidRequest, type NotFound, Unavailable } from "../errors.ts";
import { needsSignature } from "../mandates/authorization-session.ts";
import { Authorizations, type AuthorizeFailure } from "../mandates/authorization-signing.ts";
import type { MandateObject } from "../mandates/mandate-object.ts";
import { MandateStore } from "../mandates/mandate-store.ts";
import { Mandates } from "../mandates/mandates.ts";
import { PERMIT_TYPES, TERMS_TYPES, termsDomain, testWalletKey } from "../mandates/terms.ts";
import { TokenReads } from "../mandates/token-reads.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { formatDecimal } from "../money/decimal.ts";
import { testAmount } from "./test-amount.ts";
import { mintTestFunds } from "./test-mint.ts";

export const FundRequest = Schema.Struct({
  amount_decimal: Schema.String.annotate({ description: "Test tokens to mint to the customer's wallet" }),
}).annotate({ identifier: "TestFundRequest" });

const TEN_YEARS = 10 * 366 * 86_400;
export const AdvanceClockRequest = Schema.Struct({
  seconds: Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: TEN_YEARS })).annotate({
    description: `How far to move the chain's time, 1-${TEN_YEARS} seconds`,
  }),
  chain: Schema.optionalKey(Schema.Int.annotate({ description: "Default: your only configured test chain" })),
}).annotate({ identifier: "TestClockAdvanceRequest" });

export const TestFunding = Schema.Struct({
  object: Schema.Literal("test_funding"),
  mandate: Schema.String,
  customer_address: Schema.String,
  amount: Schema.String,
  amount_decimal: Schema.String,
  balance_decimal: Schema.String,
  transaction_hash: Schema.String,
}).annotate({ identifier: "TestFunding" });

export const TestClock = Schema.Struct({
  object: Schema.Literal("test_clock"),
  chain: Schema.Int,
  advanced_by: Schema.Int,
  now: Schema.Int.annotate({ description: "The chain's time after the move, unix seconds" }),
}).annotate({ identifier: "TestClock" });

const WAIT = Duration.seconds(30);

const unavailable = (message: string) => new Unavailable({ code: "chain_unavailable", message });

export class TestHelpers extends Context.Service<
  TestHelpers,
  {
    readonly fund: (
      scope: MerchantScope,
      mandateId: string,
      input: typeof FundRequest.Type,
    ) => Effect.Effect<typeof TestFunding.Type, InvalidRequest | NotFound | Unavailable | SqlError.SqlError>;
    readonly authorize: (
      scope: MerchantScope,
      mandateId: string,
    ) => Effect.Effect<MandateObject, AuthorizeFailure | NotFound>;
    readonly advanceClock: (
      scope: MerchantScope,
      input: typeof AdvanceClockRequest.Type,
    ) => Effect.Effect<typeof TestClock.Type, InvalidRequest | Unavailable | SqlError.SqlError>;
  }
>()("TestHelpers") {
  static readonly layer = Layer.effect(
    TestHelpers,
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient;
      const registry = yield* ChainRegistry;
      const tokenStates = yield* TokenStates;
      const clients = yield* ChainClients;
      const heads = yield* ChainHeads;
      const relayer = yield* Relayer;
      const gasCosts = yield* GasCosts;
      const mandates = yield* Mandates;
      const store = yield* MandateStore;
      const tokens = yield* TokenReads;
      const merchantChains = yield* MerchantChains;
      const authorizations = yield* Authorizations;

      const chainOf = (chainId: number) => {
        const chain = registry.byId(chainId);
        return chain ? Effect.succeed(chain) : Effect.die(new Error(`unknown chain ${chainId}`));
      };

      const fund = (scope: MerchantScope, mandateId: string, input: typeof FundRequest.Type) =>
        Effect.gen(function* () {
          const mandate = yield* store.load(scope, mandateId);
          const chain = yield* chainOf(mandate.chain_id);
          const token = tokenOf(chain, mandate.token_address);
          const decimals = token?.decimals ?? 0;
          const amount = yield* testAmount(input.amount_decimal, decimals);
          const vault = (mandate.customer_address ??
            privateKeyToAccount(testWalletKey(mandate.id)).address) as Hex;
          const hash = yield* mintTestFunds(
            chain,
            mandate.token_address as Hex,
            vault,
            amount,
            "test_funding_unsupported",
            { object: "mandate", id: mandate.id, merchantId: mandate.merchant_id },
          ).pipe(
            Effect.provideService(SqlClient.SqlClient, sql),
            Effect.provideService(Relayer, relayer),
            Effect.provideService(GasCosts, gasCosts),
            Effect.provideService(TokenStates, tokenStates),
          );
          const balance = yield* tokens
            .balance(chain, mandate.token_address as Hex, vault)
            .pipe(Effect.mapError((e) => unavailable(e.message)));
          return {
            object: "test_funding" as const,
            mandate: mandate.id,
            customer_address: vault,
            amount: amount.toString(),
            amount_decimal: formatDecimal(amount, decimals),
            balance_decimal: formatDecimal(balance, decimals),
            transaction_hash: hash,
          };
        });

      /**
       * The mandate once the signature of `nonce` has been applied: mandate.authorized comes from the
       * indexed chain event. 503 when the indexer has not caught up in time; a retry waits again.
       */
      const appliedRendered = (mandateId: string, nonce: bigint) =>
        Effect.gen(function* () {
          const applied = yield* Effect.gen(function* () {
            for (;;) {
              const row = yield* store.reload(mandateId);
              if (BigInt(row.signature_version ?? 0) >= nonce) return row;
              yield* Effect.sleep("50 millis");
            }
          }).pipe(Effect.timeoutOption(WAIT));
          if (applied._tag === "None")
            return yield* unavailable(
              "The chain has the signature but the indexer has not caught up yet; mandate.authorized will follow. Retrying waits for it and signs nothing again.",
            );
          return mandates.render(applied.value);
        });

      const authorize = (scope: MerchantScope, mandateId: string) =>
        Effect.gen(function* () {
          const mandate = yield* store.load(scope, mandateId);
          const wallet = privateKeyToAccount(testWalletKey(mandate.id));
          if (
            mandate.customer_address !== null &&
            mandate.customer_address.toLowerCase() !== wallet.address.toLowerCase()
          )
            return yield* new InvalidRequest({
              code: "test_wallet_mismatch",
              message: `A real wallet (${mandate.customer_address}) signed this mandate; only that wallet can sign it again, at authorization_url.`,
              param: null,
            });
          const chain = yield* chainOf(mandate.chain_id);
          const request = yield* authorizations.request(mandate, wallet.address, { resign: true });
          // A signature the chain has and the service has not applied yet (an earlier call answered 503,
          // and this is its retry): wait for it, never sign again. A second signature would be a second
          // authorization on chain, and a second mandate.authorized.
          const onchainNonce = request.terms.nonce - 1n;
          if (onchainNonce > BigInt(mandate.signature_version ?? 0))
            return yield* appliedRendered(mandate.id, onchainNonce);
          // Signed already, nothing pending (a retry that came after the signature was applied): the
          // mandate as it is.
          if (!needsSignature(mandate)) return mandates.render(mandate);
          const signature = yield* Effect.promise(() =>
            wallet.signTypedData({
              domain: termsDomain(chain.id, chain.escrow.address),
              types: TERMS_TYPES,
              primaryType: "Terms",
              message: request.terms,
            }),
          );
          const permit = request.permit;
          const permitSignature = permit
            ? yield* Effect.promise(() =>
                wallet.signTypedData({
                  domain: permit.domain,
                  types: PERMIT_TYPES,
                  primaryType: "Permit",
                  message: permit.message,
                }),
              )
            : null;
          if (request.json.approve !== null)
            return yield* new InvalidRequest({
              code: "test_authorization_unsupported",
              message:
                "This token has no permit, so the test wallet would need gas to approve; sign at authorization_url.",
              param: null,
            });
          const submitted = yield* outsideTransaction(
            authorizations.submit(mandate, {
              customer_address: wallet.address,
              terms: request.json.terms.message,
              signature,
              permit_signature: permitSignature,
            }),
          ).pipe(Effect.provideService(SqlClient.SqlClient, sql));
          const mined = yield* relayer.waitMined(chain.id, submitted.purpose, WAIT);
          if (mined?.status !== "mined")
            return yield* unavailable(
              "The authorization was not mined in time. Retry with a new Idempotency-Key.",
            );
          return yield* appliedRendered(mandate.id, BigInt(submitted.nonce));
        });

      const advanceClock = (scope: MerchantScope, input: typeof AdvanceClockRequest.Type) =>
        Effect.gen(function* () {
          const configured = yield* merchantChains.list(scope);
          const { chain } = yield* chooseChain(registry, scope, configured, input.chain);
          if (!chain.local)
            return yield* new InvalidRequest({
              code: "test_clock_unsupported",
              message: `Chain ${chain.id} is not a local chain run by this deployment, so its clock cannot be moved.`,
              param: "chain",
            });
          const client = clients.client(chain);
          yield* clients
            .rpc(chain, "advance", async () => {
              await client.request({
                method: "evm_increaseTime",
                params: [`0x${input.seconds.toString(16)}`],
              } as never);
              await client.request({ method: "evm_mine", params: [] } as never);
            })
            .pipe(Effect.mapError((e) => unavailable(e.message)));
          // This process's requests see the new time at once, not after the head's subscription.
          const now = yield* heads.refresh(chain).pipe(
            Effect.map((head) => head.timestamp),
            Effect.mapError((e) => unavailable(e.message)),
          );
          return { object: "test_clock" as const, chain: chain.id, advanced_by: input.seconds, now };
        });

      return { fund, authorize, advanceClock };
    }),
  );
}
