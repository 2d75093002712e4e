/**
 * The `mandate` scheme for x402's own packages (docs/x402.md). A client whose wallet authorized a
 * metered subscription's mandate once registers `MandateClientScheme` with `@x402/fetch`'s `x402Client`
 * and pays each request by signing it, not with a transfer; the merchant's resource server registers
 * `MandateServerScheme` with `@x402/hono`'s (or `@x402/express`'s) `x402ResourceServer`, with the
 * gateway's `/x402` as its facilitator. The usage is charged on chain with the subscription's next
 * invoice, never above the mandate's cap.
 */
import type {
  AssetAmount,
  Network,
  PaymentPayloadResult,
  PaymentRequirements,
  Price,
  SchemeNetworkClient,
  SchemeNetworkServer,
} from "@x402/core/types";
import { getAddress, type Hex, toHex } from "viem";
import { MANDATE_SCHEME, mandateUsageTypedData } from "../service/x402/mandate-usage.ts";

/** The customer's wallet: a viem account (or any signer of EIP-712 typed data at that address). */
export interface MandateSigner {
  readonly address: Hex;
  signTypedData(typedData: ReturnType<typeof mandateUsageTypedData>): Promise<Hex>;
}

export class MandateClientScheme implements SchemeNetworkClient {
  readonly scheme = MANDATE_SCHEME;

  private readonly options: { readonly subscription: string; readonly signer: MandateSigner };

  constructor(options: { readonly subscription: string; readonly signer: MandateSigner }) {
    this.options = options;
  }

  async createPaymentPayload(
    x402Version: number,
    requirements: PaymentRequirements,
  ): Promise<PaymentPayloadResult> {
    const chainId = Number(requirements.network.split(":")[1]);
    const nonce = toHex(crypto.getRandomValues(new Uint8Array(32)));
    const validBefore = BigInt(Math.floor(Date.now() / 1000) + requirements.maxTimeoutSeconds);
    const signature = await this.options.signer.signTypedData(
      mandateUsageTypedData(chainId, {
        subscription: this.options.subscription,
        payTo: getAddress(requirements.payTo),
        asset: getAddress(requirements.asset),
        amount: BigInt(requirements.amount),
        nonce,
        validBefore,
      }),
    );
    return {
      x402Version,
      payload: {
        subscription: this.options.subscription,
        nonce,
        validBefore: validBefore.toString(),
        signature,
      },
    };
  }
}

export class MandateServerScheme implements SchemeNetworkServer {
  readonly scheme = MANDATE_SCHEME;
  readonly defaultAssetTransferMethod = "default";
  readonly paymentFlows = { default: { supported: ["authorization"], default: "authorization" } } as const;

  /** A price in base units of a token: `{ amount, asset }` (the subscription's token). */
  async parsePrice(price: Price, network: Network): Promise<AssetAmount> {
    if (typeof price === "object" && price !== null && "amount" in price && price.asset)
      return { amount: price.amount, asset: price.asset, extra: price.extra ?? {} };
    throw new Error(`The mandate scheme takes a price as { amount (base units), asset } on ${network}.`);
  }

  async enhancePaymentRequirements(requirements: PaymentRequirements): Promise<PaymentRequirements> {
    return requirements;
  }
}
