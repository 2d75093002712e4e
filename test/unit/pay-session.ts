/** A pay page's session as the service sends it, for the unit tests of the pay page and the shared core. */
import type { Session } from "../../service/http/pay-page/client/types.ts";

export const TOKEN_ADDRESS = "0x5FbDB2315678afecb367f032d93F642f64180aa3";
export const DEPOSIT = "0x0CCA1773165C78cc2AF59788d1ECbd363fb926A4";
export const NOW = 1_800_000_000;

export const paySession: Session = {
  object: "pay_session",
  payment: "pay_1",
  livemode: false,
  status: "requires_payment",
  merchant: { name: "Acme" },
  description: "Order 42",
  amount_decimal: "10",
  amount_received_decimal: "0",
  amount_pending_decimal: "0",
  amount_remaining_decimal: "10",
  amount_remaining: "10000000",
  amount_overpaid_decimal: "0",
  token: { symbol: "USDC", address: TOKEN_ADDRESS, decimals: 6 },
  chain: {
    id: 31337,
    name: "Local chain (anvil)",
    rpc_url: "http://127.0.0.1:8545",
    native_currency: { name: "Ether", symbol: "ETH", decimals: 18 },
  },
  address: DEPOSIT,
  payment_uri: `ethereum:${TOKEN_ADDRESS}@31337/transfer?address=${DEPOSIT}&uint256=10000000`,
  expires_at: NOW + 900,
  now: NOW,
  transfers: 0,
  gasless: {
    domain: { name: "Test USD Coin", version: "1", chainId: 31337, verifyingContract: TOKEN_ADDRESS },
    types: {
      EIP712Domain: [
        { name: "name", type: "string" },
        { name: "version", type: "string" },
        { name: "chainId", type: "uint256" },
        { name: "verifyingContract", type: "address" },
      ],
      TransferWithAuthorization: [
        { name: "from", type: "address" },
        { name: "to", type: "address" },
        { name: "value", type: "uint256" },
        { name: "validAfter", type: "uint256" },
        { name: "validBefore", type: "uint256" },
        { name: "nonce", type: "bytes32" },
      ],
    },
    primary_type: "TransferWithAuthorization",
    to: DEPOSIT,
    value: "10000000",
  },
  gasless_transaction: null,
};
