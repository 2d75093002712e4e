/** Examples of the mandate and charge routes. */
import type { ChargeObject } from "../../charges/charge-object.ts";
import type { CreateCharge } from "../../charges/charges.ts";
import type { MandateObject } from "../../mandates/mandate-object.ts";
import type { CreateMandate, UpdateMandate } from "../../mandates/mandates.ts";
import {
  at,
  CHAIN,
  CHARGE_BLOCK,
  CUSTOMER_ADDRESS,
  HASHES,
  HOLD_SECONDS,
  IDS,
  PAYOUT_ADDRESS,
  PUBLIC_URL,
  USDC,
} from "./shared.ts";

export const createMandate: CreateMandate = {
  cap_decimal: "25.00",
  period: "month",
  customer: "cus_4821",
  reference: "order-1042",
  chain: CHAIN.id,
  token: "USDC",
  approval_periods: 12,
};

/** As POST /v1/mandates answers: waiting for the customer's signature. */
export const pendingMandate: MandateObject = {
  id: IDS.mandate,
  object: "mandate",
  livemode: false,
  status: "pending",
  chain: CHAIN.id,
  token: USDC.symbol,
  token_address: USDC.address,
  cap: "25000000",
  cap_decimal: "25",
  pending_update: null,
  period: "month",
  approval_periods: 12,
  approval_decimal: "300",
  approval_left_decimal: null,
  customer: "cus_4821",
  reference: "order-1042",
  authorization_url: `${PUBLIC_URL}/authorize/Vh3k9Qm2LxT7pWz4RbN8cYfJ`,
  customer_address: null,
  payee_address: PAYOUT_ADDRESS,
  hold_seconds: HOLD_SECONDS,
  anchor: at(60),
  last_charged_period: null,
  signature_version: null,
  authorized: null,
  latest_charge: null,
  onchain_id: null,
  origin: "api",
  created: at(60),
};

/** Signed by the customer and charged once. */
export const mandate: MandateObject = {
  ...pendingMandate,
  status: "active",
  approval_left_decimal: "280.01",
  customer_address: CUSTOMER_ADDRESS,
  last_charged_period: 0,
  signature_version: 1,
  authorized: at(900),
  latest_charge: IDS.charge,
  onchain_id: HASHES.mandateOnchainId,
};

export const raiseCap: UpdateMandate = { cap_decimal: "40.00" };

/** As POST /v1/mandates/{id} answers a raise: the customer signs it at authorization_url. */
export const mandateWithPendingRaise: MandateObject = {
  ...mandate,
  pending_update: { cap: "40000000", cap_decimal: "40", approval_decimal: "480", requested: at(1200) },
};

export const createCharge: CreateCharge = { amount_decimal: "19.99" };

/** As POST /v1/mandates/{id}/charges answers: submitted, `charge.succeeded` follows. */
export const pendingCharge: ChargeObject = {
  id: IDS.charge,
  object: "charge",
  livemode: false,
  mandate: IDS.mandate,
  status: "pending",
  failure_code: null,
  failure_message: null,
  amount: "19990000",
  amount_decimal: "19.99",
  token: USDC.symbol,
  token_address: USDC.address,
  chain: CHAIN.id,
  period: 0,
  held: false,
  release_at: null,
  pending_action: null,
  release_failure: null,
  onchain_id: null,
  onchain: null,
  ended_onchain: null,
  created: at(3600),
};

/** On chain, held in escrow until release_at. */
export const charge: ChargeObject = {
  ...pendingCharge,
  status: "succeeded",
  held: true,
  release_at: at(3606) + HOLD_SECONDS,
  onchain_id: HASHES.chargeOnchainId,
  onchain: {
    block_number: CHARGE_BLOCK,
    block_hash: HASHES.chargeBlock,
    transaction_hash: HASHES.chargeTransaction,
    log_index: 3,
    timestamp: at(3606),
  },
};

/** As POST /v1/charges/{id}/return answers: the return is submitted, `charge.returned` follows. */
export const returningCharge: ChargeObject = { ...charge, pending_action: "return" };
