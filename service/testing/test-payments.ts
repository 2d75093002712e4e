/**
 * Test mode: pay a payment's deposit address with a real token transfer on a local chain. The payer (a
 * deterministic test wallet of the payment, or any `from` address) gets test tokens minted by the
 * relayer (test-mint.ts), is impersonated on the local node, given gas, and sends a plain ERC-20 `transfer`, as a wallet or an exchange would; the
 * deposit watcher, the sweeper and the indexed sweep then do the rest, as for a real payer.
 */
import { Context, Effect, Layer, Schema } from "effect";
import { SqlClient, type SqlError } from "effect/sql";
import { encodeFunctionData, getAddress, type Hex, parseAbi } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { ChainClients } from "../chains/chain-clients.ts";
import { tokenOf } from "../chains/config.ts";
import { GasCosts } from "../chains/gas-costs.ts";
import { ChainRegistry } from "../chains/registry.ts";
import { Relayer } from "../chains/relayer.ts";
import { TokenStates } from "../chains/token-states.ts";
import { InvalidRequest, type NotFound, Unavailable } from "../errors.ts";
import { testWalletKey } from "../mandates/terms.ts";
import type { MerchantScope } from "../merchants/scope.ts";
import { formatDecimal } from "../money/decimal.ts";
import { PaymentStore } from "../payments/payment-store.ts";
import { testAmount } from "./test-amount.ts";
import { mintTestFunds } from "./test-mint.ts";

const AddressText = Schema.String.check(
  Schema.isPattern(/^0x[0-9a-fA-F]{40}$/, { message: "must be a 0x-prefixed 20-byte hex address" }),
);

export const PayRequest = Schema.Struct({
  amount_decimal: Schema.String.annotate({
    description: "How much the test payer sends, in the token's units",
  }),
  from: Schema.optionalKey(
    AddressText.annotate({
      description:
        "The payer's address (impersonated on the local chain); default: the payment's test wallet",
    }),
  ),
}).annotate({ identifier: "TestPayRequest" });
export type PayRequest = typeof PayRequest.Type;

export const TestPaymentTransfer = Schema.Struct({
  object: Schema.Literal("test_payment_transfer"),
  payment: Schema.String,
  from: Schema.String,
  to: Schema.String.annotate({ description: "The payment's deposit address" }),
  amount: Schema.String,
  amount_decimal: Schema.String,
  transaction_hash: Schema.String,
  block_number: Schema.Int,
}).annotate({ identifier: "TestPaymentTransfer" });
export type TestPaymentTransfer = typeof TestPaymentTransfer.Type;

const tokenAbi = parseAbi(["function transfer(address to, uint256 amount) returns (bool)"]);
/** Gas money for an impersonated payer that has less. */
const GAS_MONEY = 10n ** 17n;

const unsupported = (message: string) =>
  new InvalidRequest({ code: "test_payment_unsupported", message, param: null });

export class TestPayments extends Context.Service<
  TestPayments,
  {
    readonly pay: (
      scope: MerchantScope,
      paymentId: string,
      input: PayRequest,
    ) => Effect.Effect<TestPaymentTransfer, InvalidRequest | NotFound | Unavailable | SqlError.SqlError>;
  }
>()("TestPayments") {
  static readonly layer = Layer.effect(
    TestPayments,
    Effect.gen(function* () {
      const registry = yield* ChainRegistry;
      const tokenStates = yield* TokenStates;
      const clients = yield* ChainClients;
      const store = yield* PaymentStore;
      const relayer = yield* Relayer;
      const gasCosts = yield* GasCosts;
      const sql = yield* SqlClient.SqlClient;

      const pay = (scope: MerchantScope, paymentId: string, input: PayRequest) =>
        Effect.gen(function* () {
          const payment = yield* store.load(scope, paymentId);
          const chain = registry.byId(payment.chain_id);
          if (!chain) return yield* Effect.die(new Error(`payment ${paymentId} is on an unknown chain`));
          if (!chain.local)
            return yield* unsupported(
              `Chain ${chain.id} is not a local chain run by this deployment: pay ${payment.deposit_address} from a wallet.`,
            );
          const decimals = tokenOf(chain, payment.token_address)?.decimals ?? 0;
          const amount = yield* testAmount(input.amount_decimal, decimals);
          const from = getAddress(input.from ?? privateKeyToAccount(testWalletKey(payment.id)).address);
          const token = payment.token_address as Hex;
          const client = clients.client(chain);
          const send = (data: Hex) =>
            client.request({
              method: "eth_sendTransaction",
              params: [{ from, to: token, data }],
            } as never) as Promise<Hex>;
          yield* mintTestFunds(chain, token, from, amount, "test_payment_unsupported", {
            object: "payment",
            id: payment.id,
            merchantId: payment.merchant_id,
          }).pipe(
            Effect.provideService(Relayer, relayer),
            Effect.provideService(GasCosts, gasCosts),
            Effect.provideService(SqlClient.SqlClient, sql),
            Effect.provideService(TokenStates, tokenStates),
          );
          const mined = yield* clients
            .rpc(chain, "test payment", async () => {
              await client.request({ method: "anvil_impersonateAccount", params: [from] } as never);
              try {
                const balance = await client.getBalance({ address: from });
                if (balance < GAS_MONEY)
                  await client.request({
                    method: "anvil_setBalance",
                    params: [from, `0x${GAS_MONEY.toString(16)}`],
                  } as never);
                const sent = await send(
                  encodeFunctionData({
                    abi: tokenAbi,
                    functionName: "transfer",
                    args: [payment.deposit_address as Hex, amount],
                  }),
                );
                return await client.waitForTransactionReceipt({ hash: sent, timeout: 30_000 });
              } finally {
                await client.request({ method: "anvil_stopImpersonatingAccount", params: [from] } as never);
              }
            })
            .pipe(
              Effect.mapError(
                (e) =>
                  new Unavailable({
                    code: "chain_unavailable",
                    message: `The test payment failed: ${e.message}`,
                  }),
              ),
            );
          if (mined.status !== "success")
            return yield* new Unavailable({
              code: "chain_unavailable",
              message: "The test transfer reverted.",
            });
          return {
            object: "test_payment_transfer" as const,
            payment: payment.id,
            from,
            to: getAddress(payment.deposit_address),
            amount: amount.toString(),
            amount_decimal: formatDecimal(amount, decimals),
            transaction_hash: mined.transactionHash,
            block_number: Number(mined.blockNumber),
          };
        });

      return { pay };
    }),
  );
}
