import type { SettleResponse, SupportedResponse, VerifyResponse, X402Request } from "../../x402/wire.ts";
import { CHAIN, CUSTOMER_ADDRESS, DEPOSIT_ADDRESS, IDS, USDC } from "./shared.ts";

const NETWORK = `eip155:${CHAIN.id}`;
const requirements = {
  scheme: "exact",
  network: NETWORK,
  amount: "4000000",
  asset: USDC.address,
  payTo: DEPOSIT_ADDRESS,
  maxTimeoutSeconds: 300,
  extra: { name: "USD Coin", version: "2" },
};

/** What `@x402/core`'s HTTPFacilitatorClient posts to /x402/verify and /x402/settle. */
export const x402Request: X402Request = {
  x402Version: 2,
  paymentPayload: {
    x402Version: 2,
    resource: { url: "https://api.example.com/report", description: "Report", mimeType: "application/json" },
    accepted: requirements,
    payload: {
      signature: `0x${"5d".repeat(64)}1b`,
      authorization: {
        from: CUSTOMER_ADDRESS,
        to: DEPOSIT_ADDRESS,
        value: "4000000",
        validAfter: "1772467000",
        validBefore: "1772467900",
        nonce: `0x${"a7".repeat(32)}`,
      },
    },
  },
  paymentRequirements: requirements,
};

export const validVerify: VerifyResponse = { isValid: true, payer: CUSTOMER_ADDRESS };

export const settled: SettleResponse = {
  success: true,
  payer: CUSTOMER_ADDRESS,
  transaction: `0x${"3c".repeat(32)}`,
  network: NETWORK,
  amount: "4000000",
  extra: { payment: IDS.payment },
};

export const supported: SupportedResponse = {
  kinds: [
    {
      x402Version: 2,
      scheme: "exact",
      network: NETWORK,
      extra: {
        depositTerms: {
          escrow: "0x5FbDB2315678afecb367f032d93F642f64180aa3",
          payee: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8",
          operator: "0x976EA74026E726554dB657fA54763abd0C3a0aa9",
          holdSeconds: 604800,
        },
      },
    },
    { x402Version: 2, scheme: "mandate", network: NETWORK },
  ],
  extensions: [],
  signers: { "eip155:*": ["0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"] },
};
